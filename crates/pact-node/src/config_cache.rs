//! A node's in-memory copy of the rows that change rarely and that nearly
//! every request reads: registered agents, brands (with their settings, where
//! the `authorization_details` types live), each brand's scopes, and a
//! merchant brand's agent URL, tools and webhook signing secrets (sealed).
//!
//! Every change to those tables is announced on `pactd_config` by a table
//! trigger (migration 0010), and the change listener drops this whole copy
//! when one arrives, on every node; the node a staff change was made on drops
//! it at once, without waiting for its own notification (`pact-admin`'s
//! `seen_here_at_once`). The copy is only used while the listener
//! is subscribed and its feed proven alive by a recent heartbeat (`feed.rs`):
//! a node that cannot show it hears changes reads the database, and a
//! reconnect starts from an empty copy, because notifications sent meanwhile
//! are lost. A load that started before a change can never put an old row
//! back: each fill carries the generation it began in and is discarded when
//! the copy was dropped since.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use pact_db::agents::{Agent, AgentAndBrand};
use pact_db::brands::Brand;
use pact_db::ids::BrandId;
use pact_db::merchant::{BrandAgent, BrandTool, WebhookSecret};
use pact_db::scopes::BrandScope;
use pact_db::{DbResult, PgPool};
use serde_json::value::RawValue;

use crate::feed::ChangeFeed;

/// Past this many entries in one map, the map starts over (the rows are
/// registered by operators, so this only bounds a misconfiguration).
const MAX_ENTRIES: usize = 100_000;
/// Past this many unknown issuers, that map starts over: they are chosen by
/// whoever sends a token, before any signature is checked, and each may be
/// 2 KiB long (`pact_jose::pa_jwt::MAX_ISSUER_LEN`), so this bounds what an
/// unauthenticated spray can make a node hold (about 20 MiB).
const MAX_ABSENT: usize = 10_000;

pub struct ConfigCache {
    /// The listener is subscribed (set after it resynchronised).
    live: AtomicBool,
    /// Whether what it hears is proven current (checked at every use).
    feed: Arc<ChangeFeed>,
    generation: AtomicU64,
    entries: RwLock<Entries>,
    /// The payload of the last change notification heard. Notifications
    /// arrive in commit order, so once a probe's own payload is here every
    /// change committed before it has been applied (see the tests' `settle`).
    last_heard: std::sync::Mutex<String>,
    /// Counts notifications heard and changes of liveness, so that whoever
    /// waits for one (the tests' `settle`) is woken instead of polling.
    events: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct Entries {
    agents: HashMap<String, Agent>,
    /// Issuers looked up and not registered. Issuers are attacker-chosen, so
    /// without this a spray of unknown ones would cost a database round trip
    /// each (issue 31: legitimate traffic keeps its latency). Dropped with
    /// the rest on every change to `agents`, so a registration or an open
    /// admission is seen at once.
    absent_agents: HashMap<String, ()>,
    brands: HashMap<String, Brand>,
    /// Brand ids looked up and not found: public documents (the card, the
    /// OAuth metadata) are asked for by anyone, by any name, and each miss
    /// would otherwise be a database round trip. Bounded like
    /// `absent_agents`.
    absent_brands: HashMap<String, ()>,
    scopes: HashMap<String, Arc<Vec<BrandScope>>>,
    merchant: HashMap<String, Arc<MerchantSetup>>,
    webhook_secrets: HashMap<String, Arc<Vec<WebhookSecret>>>,
    /// The hosts staff blocked (issue 31), read by the open door before any
    /// fetch: a spray of issuers then costs no round trip for it either.
    blocked_hosts: Option<Arc<Vec<String>>>,
}

/// A merchant brand's agent URL and tools (PACT §5.5 webhook turns).
#[derive(Clone, Debug)]
pub struct MerchantSetup {
    pub agent: Option<BrandAgent>,
    /// Shared with every turn that runs on this copy (a turn keeps the tools
    /// it started with): copying the list and its schemas into each turn was
    /// a measurable part of a webhook turn's CPU (docs/performance.md).
    pub tools: Arc<Vec<BrandTool>>,
    /// The tools' scopes and limit rules, as the gate reads them.
    pub rules: Arc<pact_core::domain::terms::RulesNow>,
    /// The tools a turn offers the agent (`tools.available` of the turn
    /// webhook), written once per load: the mapped tools' name, description,
    /// scope and input schema. An imported tool nobody has mapped to a scope
    /// is not offered (deny by default).
    pub available: Box<RawValue>,
}

impl MerchantSetup {
    pub fn new(agent: Option<BrandAgent>, tools: Vec<BrandTool>) -> Self {
        let rules = pact_core::agent::bounds::merchant_rules(&tools);
        let available = offered_json(&tools);
        Self {
            agent,
            tools: Arc::new(tools),
            rules: Arc::new(rules),
            available,
        }
    }
}

/// One offered tool as the turn webhook names it.
#[derive(serde::Serialize)]
struct Offered<'a> {
    name: &'a str,
    description: &'a str,
    scope: Option<&'a str>,
    #[serde(rename = "inputSchema")]
    input_schema: Option<&'a serde_json::Value>,
}

fn offered_json(tools: &[BrandTool]) -> Box<RawValue> {
    let offered: Vec<Offered<'_>> = tools
        .iter()
        .filter(|t| t.mapped)
        .map(|t| Offered {
            name: &t.name,
            description: &t.description,
            scope: t.scope.as_deref(),
            input_schema: t.input_schema.as_ref(),
        })
        .collect();
    // Strings and JSON values only: encoding cannot fail (were it to, the
    // agent would be offered `null`, never a half list).
    serde_json::value::to_raw_value(&offered).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Where a load started, so that its result is kept only if nothing changed.
#[derive(Clone, Copy)]
struct Ticket(Option<u64>);

fn insert_bounded<V>(map: &mut HashMap<String, V>, key: &str, value: V) {
    insert_within(map, key, value, MAX_ENTRIES);
}

fn insert_within<V>(map: &mut HashMap<String, V>, key: &str, value: V, limit: usize) {
    if map.len() >= limit {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

impl ConfigCache {
    pub fn new(feed: Arc<ChangeFeed>) -> Self {
        Self {
            live: AtomicBool::new(false),
            feed,
            generation: AtomicU64::new(0),
            entries: RwLock::default(),
            last_heard: std::sync::Mutex::default(),
            events: tokio::sync::watch::Sender::new(0),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Entries> {
        match self.entries.read() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn write(&self) -> RwLockWriteGuard<'_, Entries> {
        match self.entries.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Whether this node hears changes now (the copy is in use): subscribed,
    /// and the feed proven within its bound.
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire) && self.feed.is_live()
    }

    /// Drops the whole copy: a change was announced.
    pub fn invalidate(&self) {
        let mut entries = self.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        *entries = Entries::default();
    }

    /// A change notification arrived: drop the copy, and note its payload.
    pub fn heard(&self, payload: &str) {
        self.invalidate();
        let mut last = match self.last_heard.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        payload.clone_into(&mut last);
        drop(last);
        self.events.send_modify(|n| *n += 1);
    }

    /// Wakes on every notification heard and every change of liveness.
    pub fn events(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// The payload of the last change notification heard.
    pub fn last_heard(&self) -> String {
        match self.last_heard.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// How many times the copy was dropped.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The listener subscribed and reloaded: the copy starts empty (what we
    /// held may be stale) and may fill again once the feed is proven.
    pub fn resume(&self) {
        self.set_live(true);
    }

    /// The listener lost its connection (or stopped): the copy is dropped
    /// and not used, nor filled, until [`Self::resume`].
    pub fn suspend(&self) {
        self.set_live(false);
    }

    fn set_live(&self, live: bool) {
        self.invalidate();
        self.live.store(live, Ordering::Release);
        self.events.send_modify(|n| *n += 1);
    }

    fn ticket(&self) -> Ticket {
        Ticket(
            self.is_live()
                .then(|| self.generation.load(Ordering::Acquire)),
        )
    }

    fn lookup<T>(&self, find: impl FnOnce(&Entries) -> Option<T>) -> Option<T> {
        if !self.is_live() {
            return None;
        }
        let found = find(&self.read());
        lookup_counter(found.is_some()).increment(1);
        found
    }

    fn keep(&self, ticket: Ticket, put: impl FnOnce(&mut Entries)) {
        let Ticket(Some(generation)) = ticket else {
            return;
        };
        let mut entries = self.write();
        // Checked under the lock that `invalidate` takes: no drop can slip in between.
        if self.is_live() && self.generation.load(Ordering::Acquire) == generation {
            put(&mut entries);
        }
    }

    /// The registered agent and the addressed brand (see `auth.rs`), the
    /// brand by the request path's text (no brand has one that is no brand id).
    pub async fn agent_and_brand(
        &self,
        db: &PgPool,
        issuer: &str,
        brand_id: &str,
    ) -> DbResult<AgentAndBrand> {
        if let Some(found) = self.lookup(|e| {
            let agent = match e.agents.get(issuer) {
                Some(a) => Some(a.clone()),
                None if e.absent_agents.contains_key(issuer) => None,
                None => return None,
            };
            Some(AgentAndBrand {
                agent,
                brand: Some(e.brands.get(brand_id)?.clone()),
            })
        }) {
            return Ok(found);
        }
        let ticket = self.ticket();
        let found = pact_db::agents::find_with_brand(db, issuer, brand_id).await?;
        self.keep(ticket, |e| {
            match &found.agent {
                Some(agent) => insert_bounded(&mut e.agents, issuer, agent.clone()),
                None => insert_within(&mut e.absent_agents, issuer, (), MAX_ABSENT),
            }
            if let Some(brand) = &found.brand {
                insert_bounded(&mut e.brands, brand_id, brand.clone());
            }
        });
        Ok(found)
    }

    /// The brand the request path names, for the public documents (the
    /// agent card, the OAuth metadata and key sets): `None` when there is
    /// none by that name (PACT §2's bare 404).
    pub async fn brand(&self, db: &PgPool, brand_id: &str) -> DbResult<Option<Brand>> {
        if let Some(found) = self.lookup(|e| match e.brands.get(brand_id) {
            Some(b) => Some(Some(b.clone())),
            None if e.absent_brands.contains_key(brand_id) => Some(None),
            None => None,
        }) {
            return Ok(found);
        }
        let ticket = self.ticket();
        let found = pact_db::brands::find(db, brand_id).await?;
        self.keep(ticket, |e| match &found {
            Some(brand) => insert_bounded(&mut e.brands, brand_id, brand.clone()),
            None => insert_within(&mut e.absent_brands, brand_id, (), MAX_ABSENT),
        });
        Ok(found)
    }

    /// The hosts staff blocked (`admission::host_blocked` reads them).
    pub async fn blocked_hosts(&self, db: &PgPool) -> DbResult<Arc<Vec<String>>> {
        if let Some(found) = self.lookup(|e| e.blocked_hosts.clone()) {
            return Ok(found);
        }
        let ticket = self.ticket();
        let hosts: Arc<Vec<String>> = Arc::new(
            pact_db::registries::blocked_hosts(db)
                .await?
                .into_iter()
                .map(|b| b.host)
                .collect(),
        );
        self.keep(ticket, |e| e.blocked_hosts = Some(hosts.clone()));
        Ok(hosts)
    }

    /// A brand's scopes, in scope-id order.
    pub async fn scopes(&self, db: &PgPool, brand_id: &BrandId) -> DbResult<Arc<Vec<BrandScope>>> {
        if let Some(hit) = self.lookup(|e| e.scopes.get(brand_id.as_str()).cloned()) {
            return Ok(hit);
        }
        let ticket = self.ticket();
        let loaded = Arc::new(pact_db::scopes::list(db, brand_id).await?);
        self.keep(ticket, |e| {
            insert_bounded(&mut e.scopes, brand_id, loaded.clone())
        });
        Ok(loaded)
    }

    /// The brand's tools and their rules now: the merchant's (from this
    /// copy of its setup), or the built-in agent's.
    pub async fn brand_rules(
        &self,
        db: &PgPool,
        brand: &Brand,
    ) -> DbResult<pact_core::domain::terms::RulesNow> {
        if brand.agent() == pact_db::brands::AgentKind::Webhook {
            Ok((*self.merchant(db, &brand.id).await?.rules).clone())
        } else {
            Ok(pact_core::agent::bounds::builtin_rules(
                &pact_core::agent::demo_tools::all(),
            ))
        }
    }

    /// A merchant brand's agent URL and tools.
    pub async fn merchant(&self, db: &PgPool, brand_id: &BrandId) -> DbResult<Arc<MerchantSetup>> {
        if let Some(hit) = self.lookup(|e| e.merchant.get(brand_id.as_str()).cloned()) {
            return Ok(hit);
        }
        let ticket = self.ticket();
        let tools = pact_db::merchant::list_tools(db, brand_id).await?;
        let loaded = Arc::new(MerchantSetup::new(
            pact_db::merchant::find_agent(db, brand_id).await?,
            tools,
        ));
        self.keep(ticket, |e| {
            insert_bounded(&mut e.merchant, brand_id, loaded.clone())
        });
        Ok(loaded)
    }

    /// A merchant brand's webhook signing secrets as stored (sealed): those
    /// that signed at the time they were read, the current one first. Which
    /// of them still sign is the caller's check at its own `now` (a grace
    /// period may end while the copy is kept); a new or rotated secret drops
    /// the copy (migration 0040).
    pub async fn webhook_secrets(
        &self,
        db: &PgPool,
        brand_id: &BrandId,
        now: time::OffsetDateTime,
    ) -> DbResult<Arc<Vec<WebhookSecret>>> {
        if let Some(hit) = self.lookup(|e| e.webhook_secrets.get(brand_id.as_str()).cloned()) {
            return Ok(hit);
        }
        let ticket = self.ticket();
        let loaded = Arc::new(pact_db::merchant::signing_secrets(db, brand_id, now).await?);
        self.keep(ticket, |e| {
            insert_bounded(&mut e.webhook_secrets, brand_id, loaded.clone())
        });
        Ok(loaded)
    }
}

/// `pactd_config_cache_total{result}`: its two series' handles, made once.
/// Every request looks the cache up several times, and `counter!` builds and
/// hashes the key and, under the Prometheus recorder, allocates it on every
/// call (issue 27). Made on first use, after `serve` installed the recorder;
/// a process that installs its recorder only after a lookup (a test binary)
/// keeps counting into the no-op one, so no test reads these values.
fn lookup_counter(hit: bool) -> &'static metrics::Counter {
    static HIT: std::sync::LazyLock<metrics::Counter> = std::sync::LazyLock::new(
        || metrics::counter!("pactd_config_cache_total", "result" => "hit"),
    );
    static MISS: std::sync::LazyLock<metrics::Counter> = std::sync::LazyLock::new(
        || metrics::counter!("pactd_config_cache_total", "result" => "miss"),
    );
    if hit { &HIT } else { &MISS }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_offers_only_mapped_tools_with_their_documented_members() {
        let mut unmapped = BrandTool::at_url(
            &BrandId::parse("shop").unwrap(),
            "imported",
            None,
            "https://m.example/t",
        );
        unmapped.mapped = false;
        let mut lookup = BrandTool::at_url(
            &BrandId::parse("shop").unwrap(),
            "my_orders",
            Some("orders:read"),
            "https://m.example/orders",
        );
        lookup.description = "Your orders".to_owned();
        lookup.input_schema = Some(serde_json::json!({"type": "object"}));
        let public = BrandTool::at_url(
            &BrandId::parse("shop").unwrap(),
            "store_hours",
            None,
            "https://m.example/hours",
        );
        let setup = MerchantSetup::new(None, vec![unmapped, lookup, public]);
        let offered: serde_json::Value = serde_json::from_str(setup.available.get()).unwrap();
        assert_eq!(
            offered,
            serde_json::json!([
                {"name": "my_orders", "description": "Your orders", "scope": "orders:read",
                 "inputSchema": {"type": "object"}},
                {"name": "store_hours", "description": "", "scope": null, "inputSchema": null},
            ])
        );
        // The turn's gate still sees every tool (an unmapped one is refused there).
        assert_eq!(setup.tools.len(), 3);
    }
}
