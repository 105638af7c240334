//! Operations beyond a limit, put to the person one by one (PACT §5.5,
//! step-up, for `authorization_details`). A turn whose call went beyond a
//! limit becomes a step-up task; its device authorization carries the
//! calls (`device_authorizations.operations`: arguments and all, for the
//! consent page in the person's language) and, as `authorization_details`,
//! one `pactd.operation` entry per call naming the tool and `argsHash`
//! (what the task's `pact.missingAuthorizationDetails` shows the personal
//! agent). Approving adds each operation, with a budget of one use, to the
//! grants it was called under (`consent::approve_operations`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::BeyondCall;
use crate::domain::limits::{self, FieldKind};
use crate::domain::money::Amount;
use crate::domain::terms::{Beyond, BeyondWhy, OPERATION_TYPE};
use crate::web::{i18n, limit_words};

/// One call the person is asked about, as stored with the authorization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedOperation {
    pub grant_id: Uuid,
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
    /// The call in the current language's words.
    pub fn summary_text(&self) -> String {
        limit_words::operation(&self.tool, &self.summary, &self.description, &self.args)
    }

    /// Why it needs the person, in the current language's words.
    pub fn beyond_text(&self) -> String {
        limit_words::beyond(&self.beyond.to_beyond())
    }

    /// The amounts the approved call may move.
    pub fn amounts(&self) -> Vec<Amount> {
        self.amounts.iter().filter_map(Amount::from_json).collect()
    }
}

/// What a step-up beyond a limit stores and shows.
#[derive(Clone, Debug)]
pub struct Asked {
    /// The `pactd.operation` entries (`authorization_details`, and the
    /// task's `pact.missingAuthorizationDetails`).
    pub entries: Value,
    /// [`AskedOperation`]s (`device_authorizations.operations`).
    pub stored: Value,
    /// One English sentence per operation, for the task's message.
    pub sentences: Vec<String>,
    scopes: BTreeSet<String>,
}

impl Asked {
    pub fn of(calls: &[BeyondCall]) -> Self {
        let ops: Vec<AskedOperation> = calls
            .iter()
            .map(|c| AskedOperation {
                grant_id: c.grant_id,
                tool: c.tool.clone(),
                scope: c.scope.clone(),
                args: c.args.clone(),
                args_hash: c.args_hash.clone(),
                amounts: c.amounts.iter().map(|a| a.to_json()).collect(),
                summary: c.summary.clone(),
                description: c.description.clone(),
                beyond: BeyondRecord::of(&c.beyond),
            })
            .collect();
        i18n::with_lang(i18n::Lang::En, || {
            let entries: Vec<Value> = ops
                .iter()
                .map(|o| {
                    json!({
                        "type": OPERATION_TYPE,
                        "tool": o.tool,
                        "argsHash": o.args_hash,
                        "description": o.summary_text(),
                        "beyond": {
                            "type": o.beyond.type_name,
                            "field": o.beyond.field,
                            "limit": o.beyond.limit,
                            "why": o.beyond.why,
                        },
                    })
                })
                .collect();
            let sentences = ops
                .iter()
                .map(|o| format!("{} ({})", o.summary_text(), o.beyond_text()))
                .collect();
            Self {
                entries: Value::Array(entries),
                stored: serde_json::to_value(&ops).unwrap_or(Value::Null),
                sentences,
                scopes: ops.iter().map(|o| o.scope.clone()).collect(),
            }
        })
    }

    pub fn scopes(&self) -> BTreeSet<String> {
        self.scopes.clone()
    }
}

/// The operations an authorization asks about, if it is such a step-up.
pub fn asked_of(stored: Option<&Value>) -> Option<Vec<AskedOperation>> {
    stored.and_then(|v| serde_json::from_value(v.clone()).ok())
}
