//! Issue 33, item 3: metrics that Prometheus accepts and can alert on. The
//! page a real node serves passes `promtool check metrics` (HELP and TYPE for
//! every family, Prometheus' naming rules), every counter whose labels are
//! known is there at 0 before its first event, and the example alerting rules
//! (`deploy/prometheus/alerts.yml`) pass `promtool check rules` and their own
//! `promtool test rules` file.
//!
//! The promtool parts skip, saying so, when promtool is not installed
//! (Debian: `apt-get install prometheus`; `.ci/run` installs it when it can).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use pact_server::telemetry::{FAMILIES, Kind};
use pact_tests::TestApp;

/// Whether promtool runs here; when not, the line the skipping test prints.
fn promtool() -> Option<()> {
    let found = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        pact_tests::skip(
            "promtool is not installed (Debian: apt-get install --no-install-recommends prometheus)",
        );
    }
    found.then_some(())
}

fn deploy_prometheus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

/// A node with the recorder installed and its metrics listener; one request
/// answered through it; the page as Prometheus would scrape it.
async fn scraped_page() -> (TestApp, String) {
    let handle = pact_server::telemetry::install().expect("recorder");
    let app = TestApp::spawn().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(pact_server::telemetry::serve(
        app.state.clone(),
        handle,
        listener,
        std::future::pending(),
    ));
    let res = app
        .http
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = app.http.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let page = res.text().await.unwrap();
    (app, page)
}

/// The page's `# TYPE` lines: family name and type.
fn declared_types(page: &str) -> Vec<(String, String)> {
    page.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
        .collect()
}

/// Every family on the page is one of pactd's, with its type and HELP; every
/// counter with known label sets is there, each set, before any event; and
/// docs/operations.md lists every family.
#[tokio::test]
async fn every_family_has_help_and_type_and_known_counters_start_at_zero() {
    let (_app, page) = scraped_page().await;
    let types = declared_types(&page);
    for (name, kind) in &types {
        let family = FAMILIES
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} is on the page but not in telemetry::FAMILIES"));
        let expected = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        assert_eq!(kind, expected, "{name}");
        assert!(
            page.lines()
                .any(|l| l.starts_with(&format!("# HELP {name} ")) && l.len() > name.len() + 8),
            "{name} has no HELP text:\n{page}"
        );
    }
    for family in FAMILIES {
        for labels in family.labels {
            let series = if labels.is_empty() {
                family.name.to_owned()
            } else {
                let inner: Vec<String> =
                    labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
                format!("{}{{{}}}", family.name, inner.join(","))
            };
            // Other tests of this binary share the recorder and may have
            // counted already: the series must be there, at 0 or more.
            let value = page
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{series} ")))
                .unwrap_or_else(|| panic!("{series} is missing before its first event:\n{page}"));
            assert!(value.parse::<f64>().unwrap() >= 0.0, "{series} {value}");
        }
    }
    // The families recorded at scrape time and by the request above.
    for name in [
        "pactd_http_requests_total",
        "pactd_http_request_duration_seconds",
        "pactd_listener_feed_age_seconds",
        "pactd_refresh_token_reuse_total",
        "pactd_listener_failures_total",
    ] {
        assert!(types.iter().any(|(n, _)| n == name), "{name}:\n{page}");
    }
    // Latency buckets from below a millisecond to the request timeout.
    for le in ["0.00025", "0.001", "2.5", "30", "+Inf"] {
        assert!(
            page.contains(&format!("le=\"{le}\"")),
            "no bucket le={le}:\n{page}"
        );
    }
    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"),
    )
    .unwrap();
    for family in FAMILIES {
        assert!(
            docs.contains(&format!("`{}`", family.name)),
            "docs/operations.md does not list {}",
            family.name
        );
    }
}

/// The sum of a family's samples whose labels include `label`.
fn sum_with(page: &str, family: &str, label: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A client chooses the method, so a method outside HTTP's own is counted
/// as `other`: as sent, each made-up method would be a new series kept for
/// the life of the process (unbounded memory and page). Each request is
/// counted once, also when its series' handles are already made.
#[tokio::test]
async fn made_up_methods_are_counted_as_other_never_by_name() {
    let (app, before) = scraped_page().await;
    let family = "pactd_http_requests_total";
    let other_before = sum_with(&before, family, "method=\"other\"");
    for method in ["BREW", "PURGE", "BREW"] {
        let res = app
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}/healthz", app.base_url),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 405, "{method}");
    }
    let (_again, after) = scraped_page().await;
    assert_eq!(
        sum_with(&after, family, "method=\"other\"") - other_before,
        3.0,
        "{after}"
    );
    for name in ["BREW", "PURGE"] {
        assert!(
            !after.contains(name),
            "{name} became a label value:\n{after}"
        );
    }
}

/// `promtool check metrics` on the page a real node serves: exit 0 and no
/// complaint (it exits 3 on a lint problem such as a family without HELP).
#[tokio::test]
async fn promtool_accepts_the_metrics_page() {
    let Some(()) = promtool() else { return };
    let (_app, page) = scraped_page().await;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {}\n{said}\n--- page:\n{page}",
        out.status
    );
}

/// The example alerting rules are valid and do what their tests say
/// (deploy/prometheus/alerts.test.yml: among others, the first refresh-token
/// reuse since start fires, which needs the counter exported at 0).
#[test]
fn promtool_checks_and_tests_the_example_alerting_rules() {
    let Some(()) = promtool() else { return };
    let dir = deploy_prometheus();
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {}: {}\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
