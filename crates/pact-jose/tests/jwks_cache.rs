//! The remote JWKS cache against a real HTTP endpoint on loopback.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use pact_clock::TestClock;
use pact_jose::{Alg, JwksCache, JwksError, JwksPolicy, VerifyingKey};
use support::{JwksServer, jwks, loopback_policy};
use tokio::io::AsyncWriteExt;

#[allow(clippy::expect_used)] // test setup
fn cache(policy: JwksPolicy) -> Arc<JwksCache> {
    timed_cache(policy).0
}

/// The ES256 key `kid` of `uri` from the cache, which must give it; `step`
/// names the lookup in the failure.
#[allow(clippy::expect_used)] // a test's assertion
async fn key_of(cache: &JwksCache, uri: &str, kid: &str, step: &str) -> Arc<VerifyingKey> {
    cache.key_for(uri, Some(kid), Alg::Es256).await.expect(step)
}

/// A cache on a test clock: time passes when the test says so.
#[allow(clippy::expect_used)] // test setup
fn timed_cache(policy: JwksPolicy) -> (Arc<JwksCache>, TestClock) {
    let clock = TestClock::new();
    let cache = JwksCache::with_clock(policy, clock.clone().into()).expect("cache");
    (Arc::new(cache), clock)
}

#[tokio::test]
async fn warm_cache_serves_lookups_without_fetching() {
    let server = JwksServer::start(jwks(&["k1", "k2"])).await;
    let cache = cache(loopback_policy());
    let uri = server.jwks_url();
    for i in 0..100 {
        let kid = if i % 2 == 0 { "k1" } else { "k2" };
        let key = cache
            .key_for(&uri, Some(kid), Alg::Es256)
            .await
            .expect("key");
        assert_eq!(key.kid(), Some(kid));
    }
    assert_eq!(cache.fetch_count(), 1);
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn rotated_key_is_fetched_once_after_the_cooldown() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    let (cache, clock) = timed_cache(JwksPolicy {
        unknown_kid_cooldown: Duration::from_millis(500),
        ..loopback_policy()
    });
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "k1").await;

    server.set(|s| s.body = jwks(&["k1", "k2"]));
    // Within the cooldown the unknown kid is refused without a fetch.
    let early = cache.key_for(&uri, Some("k2"), Alg::Es256).await;
    assert!(matches!(early, Err(JwksError::UnknownKey)), "{early:?}");
    assert_eq!(cache.fetch_count(), 1);

    clock.advance(Duration::from_millis(600));
    let key = key_of(&cache, &uri, "k2", "k2 after rotation").await;
    assert_eq!(key.kid(), Some("k2"));
    assert_eq!(cache.fetch_count(), 2);
    for _ in 0..20 {
        key_of(&cache, &uri, "k2", "k2").await;
    }
    assert_eq!(cache.fetch_count(), 2);
    assert_eq!(server.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hammering_unknown_kids_refetches_at_most_once_per_cooldown() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    let cooldown = Duration::from_millis(300);
    let (cache, clock) = timed_cache(JwksPolicy {
        unknown_kid_cooldown: cooldown,
        ..loopback_policy()
    });
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;

    // Four workers ask for unknown kids as fast as they can while the clock
    // moves through 1.2 s of cooldowns in 10 ms ticks; each tick lasts until
    // the workers have made at least four more lookups.
    let started = clock.instant();
    let done = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..4 {
        let (cache, uri) = (Arc::clone(&cache), uri.clone());
        let (done, lookups) = (Arc::clone(&done), Arc::clone(&lookups));
        workers.push(tokio::spawn(async move {
            let mut i = 0u32;
            while !done.load(Ordering::SeqCst) {
                let kid = format!("random-{w}-{i}");
                let got = cache.key_for(&uri, Some(&kid), Alg::Es256).await;
                assert!(matches!(got, Err(JwksError::UnknownKey)), "{got:?}");
                i += 1;
                lookups.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        }));
    }
    for _ in 0..120 {
        clock.advance(Duration::from_millis(10));
        let target = lookups.load(Ordering::SeqCst) + 4;
        while lookups.load(Ordering::SeqCst) < target {
            tokio::task::yield_now().await;
        }
    }
    done.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("worker");
    }
    let lookups = lookups.load(Ordering::SeqCst);
    let elapsed = clock.instant() - started;
    let refetches = cache.fetch_count() - 1;
    let allowed = (elapsed.as_millis() / cooldown.as_millis()) as u64 + 1;
    assert!(lookups > 100, "only {lookups} lookups");
    assert!(
        refetches >= 1,
        "a cooldown passed: the unknown kids were refetched"
    );
    assert!(
        refetches <= allowed,
        "{refetches} refetches in {elapsed:?} (allowed {allowed})"
    );
    assert_eq!(server.hits(), cache.fetch_count());
    // The known key is still served from memory.
    key_of(&cache, &uri, "k1", "k1").await;
}

/// Short TTLs so an entry goes stale within the test.
fn short_ttl_policy() -> JwksPolicy {
    JwksPolicy {
        min_ttl: Duration::from_millis(200),
        default_ttl: Duration::from_millis(200),
        unknown_kid_cooldown: Duration::from_millis(200),
        ..loopback_policy()
    }
}

#[tokio::test]
async fn stale_keys_are_served_while_the_endpoint_fails() {
    let mut server = JwksServer::start(jwks(&["k1"])).await;
    let (cache, clock) = timed_cache(short_ttl_policy());
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;

    // 500 once stale: the old key is still served.
    server.set(|s| s.status = 500);
    clock.advance(Duration::from_millis(300));
    let key = key_of(&cache, &uri, "k1", "stale key on 500").await;
    assert_eq!(key.kid(), Some("k1"));
    assert_eq!(cache.fetch_count(), 2);
    // Back off: no new attempt right after a failed one.
    for _ in 0..10 {
        key_of(&cache, &uri, "k1", "stale key during backoff").await;
    }
    assert_eq!(cache.fetch_count(), 2);
    assert_eq!(server.hits(), 2);
    // An unknown kid during backoff is refused without a fetch.
    let unknown = cache.key_for(&uri, Some("k9"), Alg::Es256).await;
    assert!(matches!(unknown, Err(JwksError::UnknownKey)), "{unknown:?}");
    assert_eq!(cache.fetch_count(), 2);

    // A 200 with a body that is not a JWKS: still the old key.
    server.set(|s| {
        s.status = 200;
        s.body = "<html>maintenance</html>".to_owned();
    });
    clock.advance(Duration::from_millis(300));
    key_of(&cache, &uri, "k1", "stale key on bad body").await;
    assert_eq!(cache.fetch_count(), 3);

    // The endpoint goes away entirely: still the old key.
    server.stop().await;
    clock.advance(Duration::from_millis(300));
    key_of(&cache, &uri, "k1", "stale key with the server gone").await;
    assert_eq!(cache.fetch_count(), 4);
}

#[tokio::test]
async fn stale_keys_are_not_served_forever() {
    let mut server = JwksServer::start(jwks(&["k1"])).await;
    let (cache, clock) = timed_cache(JwksPolicy {
        min_ttl: Duration::from_millis(100),
        max_ttl: Duration::from_millis(600),
        default_ttl: Duration::from_millis(100),
        unknown_kid_cooldown: Duration::from_millis(50),
        ..loopback_policy()
    });
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;
    server.stop().await;
    clock.advance(Duration::from_millis(200));
    key_of(&cache, &uri, "k1", "stale within the limit").await;
    // Past ttl + max_ttl (700 ms) the key is no longer trusted.
    clock.advance(Duration::from_millis(700));
    let gone = cache.key_for(&uri, Some("k1"), Alg::Es256).await;
    assert!(gone.is_err(), "{gone:?}");
}

#[tokio::test]
async fn cache_control_below_the_floor_does_not_cause_refetches() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    server.set(|s| s.cache_control = Some("max-age=1".to_owned()));
    let (cache, clock) = timed_cache(loopback_policy()); // 60 s floor
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;
    // Well past the one second asked for, still within the floor.
    clock.advance(Duration::from_secs(30));
    key_of(&cache, &uri, "k1", "cached").await;
    assert_eq!(cache.fetch_count(), 1);
}

#[tokio::test]
async fn cache_control_max_age_above_the_floor_is_honoured() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    server.set(|s| s.cache_control = Some("public, max-age=2".to_owned()));
    let (cache, clock) = timed_cache(JwksPolicy {
        min_ttl: Duration::from_millis(100),
        ..loopback_policy()
    });
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;
    clock.advance(Duration::from_millis(500));
    key_of(&cache, &uri, "k1", "fresh").await;
    assert_eq!(cache.fetch_count(), 1);
    clock.advance(Duration::from_millis(1800));
    key_of(&cache, &uri, "k1", "refetched").await;
    assert_eq!(cache.fetch_count(), 2);
}

#[tokio::test]
async fn body_over_max_bytes_is_refused() {
    let body = jwks(&["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]);
    assert!(body.len() > 1024);
    let server = JwksServer::start(body).await;
    let cache = cache(JwksPolicy {
        max_bytes: 1024,
        ..loopback_policy()
    });
    let got = cache
        .key_for(&server.jwks_url(), Some("k1"), Alg::Es256)
        .await;
    assert!(matches!(got, Err(JwksError::TooLarge)), "{got:?}");
}

#[tokio::test]
async fn chunked_body_over_max_bytes_is_abandoned() {
    // No Content-Length: the cap must be enforced while reading.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let chunk = format!("400\r\n{}\r\n", " ".repeat(0x400));
        for _ in 0..64 {
            head.extend_from_slice(chunk.as_bytes());
        }
        head.extend_from_slice(b"0\r\n\r\n");
        let _ = socket.write_all(&head).await;
        let _ = socket.shutdown().await;
    });
    let cache = cache(JwksPolicy {
        max_bytes: 4096,
        ..loopback_policy()
    });
    let got = cache
        .key_for(&format!("http://{addr}/jwks.json"), Some("k1"), Alg::Es256)
        .await;
    assert!(matches!(got, Err(JwksError::TooLarge)), "{got:?}");
    server.abort();
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    let cache = cache(loopback_policy());
    let got = cache
        .key_for(&server.url("/redirect"), Some("k1"), Alg::Es256)
        .await;
    assert!(matches!(got, Err(JwksError::Status(302))), "{got:?}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn failed_cold_fetch_is_an_error_then_backs_off() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    server.set(|s| s.status = 404);
    let (cache, clock) = timed_cache(JwksPolicy {
        unknown_kid_cooldown: Duration::from_millis(200),
        ..loopback_policy()
    });
    let uri = server.jwks_url();
    let got = cache.key_for(&uri, Some("k1"), Alg::Es256).await;
    assert!(matches!(got, Err(JwksError::Status(404))), "{got:?}");
    let again = cache.key_for(&uri, Some("k1"), Alg::Es256).await;
    assert!(matches!(again, Err(JwksError::Unavailable)), "{again:?}");
    assert_eq!(cache.fetch_count(), 1);
    // After the cooldown, and once the endpoint is fixed, it recovers.
    server.set(|s| s.status = 200);
    clock.advance(Duration::from_millis(300));
    key_of(&cache, &uri, "k1", "recovered").await;
    assert_eq!(cache.fetch_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_lookups_share_one_fetch() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    // The first fetch stays in flight until every caller has asked.
    server.hold();
    let cache = cache(loopback_policy());
    let uri = server.jwks_url();
    let barrier = Arc::new(tokio::sync::Barrier::new(51));
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (cache, uri, barrier) = (Arc::clone(&cache), uri.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            cache.key_for(&uri, Some("k1"), Alg::Es256).await
        }));
    }
    barrier.wait().await;
    server.hit(1).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(server.hits(), 1, "the callers wait for the one fetch");
    server.release();
    for task in tasks {
        let key = task.await.expect("task").expect("key");
        assert_eq!(key.kid(), Some("k1"));
    }
    assert_eq!(cache.fetch_count(), 1);
    assert_eq!(server.hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_caller_does_not_abort_the_shared_fetch() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    server.hold();
    let cache = cache(loopback_policy());
    let uri = server.jwks_url();
    let first = {
        let (cache, uri) = (Arc::clone(&cache), uri.clone());
        tokio::spawn(async move { cache.key_for(&uri, Some("k1"), Alg::Es256).await })
    };
    // The first caller's fetch has reached the endpoint: cancel the caller.
    server.hit(1).await;
    first.abort();
    let second = {
        let (cache, uri) = (Arc::clone(&cache), uri.clone());
        tokio::spawn(async move { cache.key_for(&uri, Some("k1"), Alg::Es256).await })
    };
    server.release();
    let key = second
        .await
        .expect("task")
        .expect("key from the fetch the cancelled caller started");
    assert_eq!(key.kid(), Some("k1"));
    assert_eq!(cache.fetch_count(), 1);
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn forget_drops_the_entry() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    let cache = cache(loopback_policy());
    let uri = server.jwks_url();
    key_of(&cache, &uri, "k1", "warm").await;
    cache.forget(&uri);
    key_of(&cache, &uri, "k1", "refetched").await;
    assert_eq!(cache.fetch_count(), 2);
}

#[tokio::test]
async fn kidless_lookup_needs_exactly_one_key_of_the_alg() {
    let server = JwksServer::start(jwks(&["only"])).await;
    let cache = cache(loopback_policy());
    let uri = server.jwks_url();
    let key = cache
        .key_for(&uri, None, Alg::Es256)
        .await
        .expect("only key");
    assert_eq!(key.kid(), Some("only"));
    let rsa = cache.key_for(&uri, None, Alg::Rs256).await;
    assert!(matches!(rsa, Err(JwksError::UnknownKey)), "{rsa:?}");
}

#[tokio::test]
async fn strict_policy_refuses_local_and_private_uris_without_fetching() {
    let server = JwksServer::start(jwks(&["k1"])).await;
    let cache = cache(JwksPolicy::default());
    let port = server.addr.port();
    let uris = [
        format!("http://127.0.0.1:{port}/jwks.json"),
        format!("https://127.0.0.1:{port}/jwks.json"),
        "https://10.0.0.1/jwks.json".to_owned(),
        format!("https://[::1]:{port}/jwks.json"),
        format!("https://localhost:{port}/jwks.json"),
        "https://169.254.169.254/jwks.json".to_owned(),
        "http://pa.example.com/jwks.json".to_owned(),
    ];
    for uri in &uris {
        let got = cache.key_for(uri, Some("k1"), Alg::Es256).await;
        assert!(
            matches!(
                got,
                Err(JwksError::ForbiddenAddress) | Err(JwksError::InvalidUri(_))
            ),
            "{uri}: {got:?}"
        );
        assert!(pact_jose::check_jwks_uri(uri, false).is_err(), "{uri}");
    }
    assert_eq!(cache.fetch_count(), 0);
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn inconsistent_policy_is_refused() {
    let bad = JwksPolicy {
        min_ttl: Duration::from_secs(10),
        max_ttl: Duration::from_secs(5),
        ..JwksPolicy::default()
    };
    assert!(matches!(
        JwksCache::new(bad),
        Err(JwksError::InvalidPolicy(_))
    ));
}
