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

use serde_json::{Value, json};

use crate::agent::BeyondCall;
use crate::domain::terms::OPERATION_TYPE;
use crate::web::{i18n, limit_words};

pub use crate::agent::asked::{AskedOperation, BeyondRecord, asked_of};

/// The call in the current language's words.
pub fn summary_text(o: &AskedOperation) -> String {
    limit_words::operation(&o.tool, &o.summary, &o.description, &o.args)
}

/// Why it needs the person, in the current language's words.
pub fn beyond_text(o: &AskedOperation) -> String {
    limit_words::beyond(&o.beyond.to_beyond())
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
        let ops: Vec<AskedOperation> = calls.iter().map(AskedOperation::of).collect();
        i18n::with_lang(i18n::Lang::En, || {
            let entries: Vec<Value> = ops
                .iter()
                .map(|o| {
                    json!({
                        "type": OPERATION_TYPE,
                        "tool": o.tool,
                        "argsHash": o.args_hash,
                        "description": summary_text(o),
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
                .map(|o| format!("{} ({})", summary_text(o), beyond_text(o)))
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
