//! The layering ARCHITECTURE.md draws, kept true: a dependency that points
//! the wrong way fails here, not in review (issue 29).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each workspace crate and the workspace crates it may depend on (normal
/// and build dependencies; dev-dependencies are the tests' business). The
/// server side never reaches the client side and the client side never the
/// server: `pact-agent` talks to pactd only over the wire.
const ALLOWED: &[(&str, &[&str])] = &[
    ("pact-clock", &[]),
    ("pact-proto", &[]),
    ("pact-db", &[]),
    ("pact-devdb", &[]),
    ("pact-jose", &["pact-clock", "pact-proto"]),
    (
        "pact-server",
        &["pact-clock", "pact-db", "pact-jose", "pact-proto"],
    ),
    (
        "pactd",
        &[
            "pact-clock",
            "pact-db",
            "pact-devdb",
            "pact-jose",
            "pact-proto",
            "pact-server",
        ],
    ),
    ("pact-client", &["pact-jose", "pact-proto"]),
    (
        "pact-conformance",
        &["pact-client", "pact-jose", "pact-proto"],
    ),
    (
        "pact-agent",
        &["pact-client", "pact-conformance", "pact-jose", "pact-proto"],
    ),
    (
        "pact-tests",
        &[
            "pact-agent",
            "pact-clock",
            "pact-db",
            "pact-devdb",
            "pact-jose",
            "pact-proto",
            "pact-server",
        ],
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn workspace_crates_depend_only_the_way_the_architecture_allows() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(k, v)| (*k, v.iter().copied().collect()))
        .collect();
    let mut wrong = Vec::new();
    for p in packages {
        let name = p["name"].as_str().unwrap();
        let Some(may) = allowed.get(name) else {
            wrong.push(format!(
                "{name}: a new crate; add its place to ALLOWED and ARCHITECTURE.md"
            ));
            continue;
        };
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if ours.contains(dep) && d["kind"].as_str() != Some("dev") && !may.contains(dep) {
                wrong.push(format!("{name} → {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies ARCHITECTURE.md does not allow: {wrong:?}"
    );
}

/// The `crate::` modules a source file names (`use crate::x`, `crate::x::…`).
fn crate_modules(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .map(|(i, _)| {
            text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Inside pact-server: the domain rules are plain functions (no HTTP, no
/// database, nothing of the server but other rules), and the state the
/// handlers share is built from the layers below them, never from a face.
#[test]
fn pact_server_domain_rules_and_state_import_nothing_above_them() {
    let src = workspace_root().join("crates/pact-server/src");
    let mut wrong = Vec::new();
    for file in rust_files(&src.join("domain")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        for m in crate_modules(&text) {
            if m != "domain" {
                wrong.push(format!("{name} uses crate::{m}"));
            }
        }
        // pact-db's row types are data the rules may read; a pool or a
        // query is not (no sqlx, no PgPool).
        for io in ["axum", "sqlx", "reqwest", "tokio", "PgPool"] {
            if text.contains(&format!("{io}::")) || (io == "PgPool" && text.contains(io)) {
                wrong.push(format!("{name} uses {io}"));
            }
        }
    }
    let state = std::fs::read_to_string(src.join("state.rs")).unwrap();
    for m in crate_modules(&state) {
        if ["web", "admin", "a2a", "oauth", "router"].contains(&m.as_str()) {
            wrong.push(format!("state.rs uses crate::{m}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_module_scan_finds_what_a_file_names() {
    let found = crate_modules("use crate::domain::x;\nlet y = crate::web::page(); // crate::");
    assert_eq!(
        found,
        ["domain", "web"].iter().map(|s| s.to_string()).collect()
    );
}
