//! The audit log in sentences for the console (issue 30, item 6): who did
//! what to whom, with customers by email and platforms by name where this
//! server knows them. The raw record stays on the page beside it; these words
//! are a reading aid, never the record.

use std::collections::HashMap;

use pact_db::audit::Entry;
use serde_json::Value;
use uuid::Uuid;

use crate::web::PageError;

/// What the sentences name: customers' emails by account id and by grant,
/// platforms' names by issuer, grants' (customer, platform) by grant id.
#[derive(Default)]
pub struct Known {
    customers: HashMap<String, String>,
    agents: HashMap<String, String>,
    grants: HashMap<String, (String, String)>,
}

impl Known {
    /// Looks up what a page of entries names. A grant or account deleted
    /// since is simply not named: the sentence falls back to its id.
    pub async fn of(
        db: &pact_db::PgPool,
        within: Option<&[String]>,
        entries: &[Entry],
    ) -> Result<Known, PageError> {
        let mut known = Known {
            agents: pact_db::agents::list(db)
                .await?
                .into_iter()
                .filter(|a| !a.name.trim().is_empty())
                .map(|a| (a.issuer.into(), a.name))
                .collect(),
            ..Default::default()
        };
        for e in entries {
            let Some(target) = e.target.as_deref() else {
                continue;
            };
            let Ok(id) = target.parse::<Uuid>() else {
                continue;
            };
            if e.action.starts_with("grant.") && !known.grants.contains_key(target) {
                if let Some(g) = pact_db::grants::find(db, id.into()).await? {
                    let email = pact_db::admin_search::find_customers(
                        db,
                        within,
                        Some(&g.brand_id),
                        &g.user_sub,
                    )
                    .await?
                    .into_iter()
                    .find(|u| u.subject() == g.user_sub)
                    .map_or_else(|| format!("customer {}", g.user_sub), |u| u.email);
                    let agent = known.agent(&g.pa_issuer);
                    known.grants.insert(target.to_owned(), (email, agent));
                }
            } else if e.action.starts_with("customer.")
                && !known.customers.contains_key(target)
                && let Some(u) = pact_db::admin_search::customer(db, within, id).await?
            {
                known.customers.insert(target.to_owned(), u.email);
            }
        }
        Ok(known)
    }

    fn agent(&self, issuer: &str) -> String {
        self.agents
            .get(issuer)
            .cloned()
            .unwrap_or_else(|| issuer.to_owned())
    }
}

/// One entry as a sentence, without its time (the page shows it beside).
pub fn sentence(e: &Entry, known: &Known) -> String {
    let who = match e.actor_kind.as_str() {
        "admin" => e.actor.clone(),
        "cli" => format!("{} (command line)", e.actor),
        kind => format!("{} ({kind})", e.actor),
    };
    let (action, refused) = match e.action.strip_suffix(".denied") {
        Some(a) => (a, true),
        None => (e.action.as_str(), false),
    };
    let what = deed(action, e, known);
    if refused {
        format!("Refused, nothing done: {who} {what}.")
    } else {
        format!("{who} {what}.")
    }
}

fn deed(action: &str, e: &Entry, known: &Known) -> String {
    let target = e.target.as_deref().unwrap_or("");
    let brand = e.brand_id.as_deref().unwrap_or("");
    let detail = |k: &str| e.detail.get(k).and_then(Value::as_str).unwrap_or("");
    let grant = || match known.grants.get(target) {
        Some((customer, agent)) => format!("{agent}'s access for {customer}"),
        None => format!("grant {target}"),
    };
    let customer = || {
        known
            .customers
            .get(target)
            .cloned()
            .unwrap_or_else(|| format!("customer {target}"))
    };
    match action {
        "grant.revoke" => format!("revoked {}", grant()),
        "grant.read" => format!("looked at {}", grant()),
        "grant.receipts.export" => format!("downloaded the receipts of {}", grant()),
        "grant.unenforceable" => format!(
            "could not evaluate the limits of {} (a call was refused)",
            grant()
        ),
        "grant.effect_beyond_limit" => format!("saw a call go beyond the limits of {}", grant()),
        "grant.list" => match e.detail.get("found").and_then(Value::as_i64) {
            Some(n) => format!("searched the grants ({n} found)"),
            None => "searched the grants".into(),
        },
        "customer.revoke_grants" => format!("revoked every grant {} gave", customer()),
        "customer.unlock" => format!("unlocked {}'s account", customer()),
        "customer.sign_out" => format!("signed {} out everywhere", customer()),
        "customer.reset_second_factors" => format!("reset {}'s second factors", customer()),
        "customer.read" => format!("looked at {}'s account", customer()),
        "customer.delete" => format!("deleted {}'s account", customer()),
        "customer.find" => "searched the customers".into(),
        "agent.register" => format!("registered the agent platform {}", known.agent(target)),
        "agent.disable" => format!("disabled the agent platform {}", known.agent(target)),
        "agent.enable" => format!("enabled the agent platform {}", known.agent(target)),
        "agent.verify" => format!("verified the agent platform {}", known.agent(target)),
        "agent.forget" => format!("forgot the unverified agent platform {target}"),
        "agent.list" => "listed the agent platforms".into(),
        "agent.block_host" => format!("blocked every agent platform on {target}"),
        "agent.unblock_host" => format!("lifted the block on {target}"),
        "registry.add" => format!("trusted the agent registry {target}"),
        "registry.remove" => format!("stopped trusting the agent registry {target}"),
        "registry.refresh" => format!("fetched the list of the agent registry {target}"),
        "registry.list" => "listed the agent registries".into(),
        "admin.sign_in" => match detail("factor") {
            "" => "signed in to the console".into(),
            f => format!("signed in to the console (with {f})"),
        },
        "admin.sign_in_failed" => "failed to sign in to the console".into(),
        "admin.sign_out" => "signed out of the console".into(),
        "admin.totp_enrolled" => "set up an authenticator app".into(),
        "admin.passkey_add" => "added a passkey".into(),
        "admin.passkey_remove" => "removed a passkey".into(),
        "admin.recovery_codes_new" => "made new recovery codes".into(),
        "admin.recovery_code_used" => "used a recovery code".into(),
        "admin.list" => "listed the staff accounts".into(),
        "audit.list" => "read the audit log".into(),
        "key.rotate" => "rotated the signing key".into(),
        "key.list" => "listed the signing keys".into(),
        "brand.card" => format!("changed the consent card of {brand}"),
        "brand.admission" => format!("changed which agents {brand} admits"),
        "brand.grant_lifetime" => format!("changed how long {brand}'s grants last"),
        "brand.read" => format!("looked at the brand {brand}"),
        "brand.list" => "listed the brands".into(),
        "scope.upsert" => format!("saved the scope {target} of {brand}"),
        "scope.remove" => format!("removed the scope {target} from {brand}"),
        "tool.upsert" => format!("saved the tool {target} of {brand}"),
        "tool.remove" => format!("removed the tool {target} from {brand}"),
        "tool.set_rules" => format!("changed the rules of the tool {target} of {brand}"),
        "details_type.upsert" => {
            format!("saved the authorization details type {target} of {brand}")
        }
        "details_type.remove" => {
            format!("removed the authorization details type {target} from {brand}")
        }
        // Anything newer than these words: the code and its target, as recorded.
        other if target.is_empty() => format!("did {other}"),
        other => format!("did {other} on {target}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: &str, target: Option<&str>) -> Entry {
        Entry {
            id: 1,
            at: time::OffsetDateTime::UNIX_EPOCH,
            actor_kind: "admin".into(),
            actor: "olga@tea.example".into(),
            action: action.into(),
            target: target.map(str::to_owned),
            brand_id: Some("tea".into()),
            detail: serde_json::json!({}),
            client_addr: None,
        }
    }

    #[test]
    fn a_revocation_names_the_platform_and_the_customer() {
        let mut known = Known::default();
        known.grants.insert(
            "g1".into(),
            ("ann@tea.example".into(), "Pal Assistant".into()),
        );
        assert_eq!(
            sentence(&entry("grant.revoke", Some("g1")), &known),
            "olga@tea.example revoked Pal Assistant's access for ann@tea.example."
        );
        // A grant this server no longer has: its id.
        assert_eq!(
            sentence(&entry("grant.revoke", Some("g2")), &known),
            "olga@tea.example revoked grant g2."
        );
    }

    #[test]
    fn a_refusal_and_an_unknown_action_still_read() {
        let known = Known::default();
        assert_eq!(
            sentence(&entry("customer.unlock.denied", Some("u1")), &known),
            "Refused, nothing done: olga@tea.example unlocked customer u1's account."
        );
        assert_eq!(
            sentence(&entry("brand.new_thing", Some("x")), &known),
            "olga@tea.example did brand.new_thing on x."
        );
    }
}
