//! A call beyond a limit as it is stored and carried between nodes: with the
//! step-up's device authorization (`device_authorizations.operations`), and in
//! a turn's fence when the call ran on another node than the turn's own
//! (PACT §5.5, step-up for `authorization_details`). The words that show it to
//! the person are pact-server's (`web/operations.rs`, from the pages' catalogue).

use pact_db::ids::GrantId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::BeyondCall;
use crate::domain::limits::{self, FieldKind};
use crate::domain::money::Amount;
use crate::domain::terms::{Beyond, BeyondWhy};

/// One call the person is asked about, as stored with the authorization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedOperation {
    pub grant_id: GrantId,
    pub tool: String,
    pub scope: String,
    pub args: Value,
    pub args_hash: String,
    /// The call's amounts in limited arguments.
    #[serde(default)]
    pub amounts: Vec<Value>,
    /// The tool's summary template and description.
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub description: String,
    pub beyond: BeyondRecord,
}

/// [`Beyond`] as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeyondRecord {
    #[serde(rename = "type")]
    pub type_name: String,
    pub field: String,
    pub kind: Option<FieldKind>,
    /// The limit's value as granted (wire form).
    pub limit: Option<Value>,
    #[serde(default)]
    pub label: String,
    /// `value`, `exhausted` or `not_covered`.
    pub why: String,
}

impl BeyondRecord {
    pub fn of(b: &Beyond) -> Self {
        Self {
            type_name: b.type_name.clone(),
            field: b.field.clone(),
            kind: b.kind,
            limit: b.limit.as_ref().map(limits::Limit::to_json),
            label: b.label.clone(),
            why: match b.why {
                BeyondWhy::Value => "value",
                BeyondWhy::Exhausted => "exhausted",
                BeyondWhy::NotCovered => "not_covered",
            }
            .to_owned(),
        }
    }

    /// Back to the judgement's form, for words.
    pub fn to_beyond(&self) -> Beyond {
        Beyond {
            type_name: self.type_name.clone(),
            field: self.field.clone(),
            kind: self.kind,
            limit: match (self.kind, &self.limit) {
                // An enum's allowed values do not matter for showing it.
                (Some(k), Some(v)) => {
                    let values: Vec<String> = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    limits::parse(k, &values, v)
                }
                _ => None,
            },
            label: self.label.clone(),
            why: match self.why.as_str() {
                "exhausted" => BeyondWhy::Exhausted,
                "not_covered" => BeyondWhy::NotCovered,
                _ => BeyondWhy::Value,
            },
        }
    }
}

impl AskedOperation {
    /// A call the tool gate found beyond a limit, as it is stored.
    pub fn of(c: &BeyondCall) -> Self {
        Self {
            grant_id: c.grant_id,
            tool: c.tool.clone(),
            scope: c.scope.clone(),
            args: c.args.clone(),
            args_hash: c.args_hash.clone(),
            amounts: c.amounts.iter().map(|a| a.to_json()).collect(),
            summary: c.summary.clone(),
            description: c.description.clone(),
            beyond: BeyondRecord::of(&c.beyond),
        }
    }

    /// Back to the tool gate's form (a call made on another node, read
    /// from the turn's fence).
    pub fn into_call(self) -> BeyondCall {
        BeyondCall {
            grant_id: self.grant_id,
            amounts: self.amounts(),
            beyond: self.beyond.to_beyond(),
            tool: self.tool,
            scope: self.scope,
            args: self.args,
            args_hash: self.args_hash,
            summary: self.summary,
            description: self.description,
        }
    }

    /// The amounts the approved call may move.
    pub fn amounts(&self) -> Vec<Amount> {
        self.amounts.iter().filter_map(Amount::from_json).collect()
    }
}

/// The operations an authorization asks about, if it is such a step-up.
pub fn asked_of(stored: Option<&Value>) -> Option<Vec<AskedOperation>> {
    stored.and_then(|v| serde_json::from_value(v.clone()).ok())
}
