//! pactd running in-process on a loopback port, on its own fresh database.

use std::net::SocketAddr;
use std::sync::Arc;

use pact_crypto::MasterKey;

use pact_server::{AppState, Config};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::pa::TestPa;

pub struct TestApp {
    pub addr: SocketAddr,
    pub base_url: String,
    pub db_url: String,
    pub db: sqlx::PgPool,
    pub state: AppState,
    pub http: reqwest::Client,
    pub master_key: Arc<MasterKey>,
    /// The node's clock: a test moves it forward instead of sleeping.
    pub clock: pact_clock::TestClock,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestApp {
    /// pactd with test-friendly settings (loopback JWKS allowed) and a `demo` brand.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(edit: impl FnOnce(&mut Config)) -> Self {
        let db_url = crate::db::fresh_database().await;
        let master = Arc::new(MasterKey::generate().unwrap());
        Self::spawn_full(
            db_url,
            master,
            edit,
            pact_server::agent::BrandAgents::builtin(),
        )
        .await
    }

    /// Another node on the same database and master key (multi-node tests).
    pub async fn spawn_peer(&self, edit: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_full(
            self.db_url.clone(),
            self.master_key.clone(),
            edit,
            pact_server::agent::BrandAgents::builtin(),
        )
        .await
    }

    pub async fn spawn_full(
        db_url: String,
        master_key: Arc<MasterKey>,
        edit: impl FnOnce(&mut Config),
        agents: pact_server::agent::BrandAgents,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = Config::for_listen(addr, master_key.clone());
        config.jwks.allow_loopback = true;
        edit(&mut config);
        let db = pact_db::connect(&db_url, 10).await.unwrap();
        pact_db::brands::insert_if_missing(
            &db,
            &crate::brand_id("demo"),
            "Demo Store",
            "A small demo store",
        )
        .await
        .unwrap();
        let clock = pact_clock::TestClock::new();
        let state = AppState::with_clock(config, db.clone(), agents, clock.clone().into())
            .await
            .unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(pact_server::serve(state.clone(), listener, async move {
            rx.await.ok();
        }));
        Self {
            addr,
            base_url: format!("http://{addr}"),
            db_url,
            db,
            state,
            master_key,
            clock,
            http: pact_jose::with_shared_tls(reqwest::Client::builder())
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            shutdown: Some(tx),
            server: Some(server),
        }
    }

    /// Waits until this node has heard every configuration change committed
    /// so far (agents, brands, scopes, merchant settings), so that its cached
    /// copy cannot serve an older row: a test that changes such a row behind
    /// the node's back calls this before its next request. Notifications
    /// arrive in commit order, so hearing our own probe means hearing all;
    /// and every channel comes in on the one listening connection, handled in
    /// order, so the revocations, device-code decisions and key changes
    /// committed before it have been heard too.
    pub async fn settle(&self) {
        let cache = &self.state.config_cache;
        if !cache.is_live() {
            // Not listening (yet): the node reads the database, and it starts
            // from an empty copy once it listens.
            return;
        }
        let mut events = cache.events();
        let probe = format!("settle-{}", uuid::Uuid::new_v4());
        sqlx::query("select pg_notify('pactd_config', $1)")
            .bind(&probe)
            .execute(&self.db)
            .await
            .unwrap();
        let heard = events.wait_for(|_| cache.last_heard() == probe || !cache.is_live());
        tokio::time::timeout(std::time::Duration::from_secs(5), heard)
            .await
            .expect("the node did not hear its change notification within 5 s")
            .unwrap();
    }

    /// Waits (bounded) until the node listens for changes, so that it uses
    /// its in-memory copies (configuration, pending polls).
    pub async fn until_listening(&self) {
        let cache = &self.state.config_cache;
        // Subscribing is announced by the copy, the heartbeat's proof by the feed.
        let (mut subscribed, mut proven) = (cache.events(), self.state.feed.events());
        let live = async {
            while !cache.is_live() {
                tokio::select! {
                    _ = subscribed.changed() => {}
                    _ = proven.changed() => {}
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), live)
            .await
            .expect("the node's change listener did not connect within 5 s");
    }

    /// Whether this node's revocation view learns of `grant` (bounded at 5 s,
    /// which only guards against a hang: the view is woken by the change).
    pub async fn hears_revocation(&self, grant: impl Into<pact_db::ids::GrantId>) -> bool {
        let grant = grant.into();
        let view = &self.state.revocations;
        let mut changes = view.changes();
        let heard = changes.wait_for(|_| view.is_revoked(grant));
        tokio::time::timeout(std::time::Duration::from_secs(5), heard)
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub fn audience(&self) -> &str {
        &self.state.config.audience
    }

    pub fn iface(&self, brand: &str) -> String {
        self.state.config.interface_url(&crate::brand_id(brand))
    }

    /// Gives the demo brand its scopes and its `order_cancellation` type, so it
    /// offers delegation (PACT §5). Without this it is an identity-only brand.
    pub async fn enable_demo_delegation(&self) {
        for (id, description) in pact_server::agent::demo_tools::DEMO_SCOPES {
            pact_db::scopes::upsert(&self.db, &crate::brand_id("demo"), id, description, false)
                .await
                .unwrap();
        }
        let types = serde_json::to_value(pact_server::domain::authz_details::demo_types()).unwrap();
        pact_db::brands::set_setting(
            &self.db,
            &crate::brand_id("demo"),
            pact_server::domain::authz_details::SETTINGS_KEY,
            &types,
        )
        .await
        .unwrap();
        self.settle().await;
    }

    pub async fn add_brand(&self, id: &str, name: &str) {
        pact_db::brands::insert(&self.db, &crate::brand_id(id), name, "")
            .await
            .unwrap();
        self.settle().await;
    }

    pub async fn register(&self, pa: &TestPa) {
        pact_db::agents::upsert(&self.db, &pa.issuer, &pa.jwks_uri, "Test PA")
            .await
            .unwrap();
        self.settle().await;
    }

    /// A registered PA with a fresh key.
    pub async fn registered_pa(&self, issuer: &str) -> TestPa {
        let pa = TestPa::start(issuer).await;
        self.register(&pa).await;
        pa
    }

    /// POSTs `body` to `{iface}/{op}` with the PA-JWT.
    pub async fn post_a2a(
        &self,
        brand: &str,
        op: &str,
        token: Option<&str>,
        body: &Value,
    ) -> reqwest::Response {
        let mut req = self
            .http
            .post(format!("{}/{op}", self.iface(brand)))
            .json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    /// `message:send` with `text`, optionally in a context.
    pub async fn send(
        &self,
        brand: &str,
        token: &str,
        message_id: &str,
        text: &str,
        context: Option<&str>,
    ) -> reqwest::Response {
        let mut message =
            json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
        if let Some(c) = context {
            message["contextId"] = json!(c);
        }
        self.post_a2a(
            brand,
            "message:send",
            Some(token),
            &json!({ "message": message }),
        )
        .await
    }

    /// Stops accepting and waits for in-flight requests to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            tx.send(()).ok();
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap().unwrap();
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            tx.send(()).ok();
        }
    }
}
