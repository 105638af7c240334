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
    ("pact-crypto", &[]),
    ("pact-jose", &["pact-clock", "pact-crypto", "pact-proto"]),
    (
        "pact-core",
        &["pact-crypto", "pact-db", "pact-jose", "pact-proto"],
    ),
    (
        "pact-node",
        &[
            "pact-clock",
            "pact-core",
            "pact-crypto",
            "pact-db",
            "pact-jose",
        ],
    ),
    // What the faces stand on: the state, errors, who is calling, consent.
    (
        "pact-app",
        &[
            "pact-clock",
            "pact-core",
            "pact-crypto",
            "pact-db",
            "pact-jose",
            "pact-node",
            "pact-proto",
        ],
    ),
    // The people's pages, below the other faces (which borrow their words).
    (
        "pact-pages",
        &[
            "pact-app",
            "pact-core",
            "pact-db",
            "pact-jose",
            "pact-node",
            "pact-proto",
        ],
    ),
    // The staff faces: the admin API and console, each action written once.
    (
        "pact-admin",
        &[
            "pact-app",
            "pact-core",
            "pact-crypto",
            "pact-db",
            "pact-jose",
            "pact-node",
            "pact-pages",
            "pact-proto",
        ],
    ),
    // The protocol faces: A2A, OAuth, the merchant gateway and MCP.
    (
        "pact-protocol-faces",
        &[
            "pact-admin",
            "pact-app",
            "pact-core",
            "pact-db",
            "pact-jose",
            "pact-node",
            "pact-pages",
            "pact-proto",
        ],
    ),
    // The thin top: the route table over every face, layers, serving.
    (
        "pact-server",
        &[
            "pact-admin",
            "pact-app",
            "pact-pages",
            "pact-protocol-faces",
            "pact-core",
            "pact-crypto",
            "pact-db",
            "pact-jose",
            "pact-node",
            "pact-proto",
        ],
    ),
    (
        "pactd",
        &[
            "pact-clock",
            "pact-crypto",
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
        &[
            "pact-client",
            "pact-conformance",
            "pact-crypto",
            "pact-jose",
            "pact-proto",
        ],
    ),
    // The fuzz targets' bodies: they call the parsers and checks of the
    // server side directly, as fuzz/ does.
    (
        "pact-fuzz-targets",
        &["pact-jose", "pact-proto", "pact-server"],
    ),
    (
        "pact-tests",
        &[
            "pact-agent",
            "pact-clock",
            "pact-crypto",
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

/// `cargo metadata` of the workspace's own packages (their declared dependencies).
fn workspace_metadata() -> serde_json::Value {
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
    meta
}

#[test]
fn workspace_crates_depend_only_the_way_the_architecture_allows() {
    let meta = workspace_metadata();
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

/// The rules and the node's memory know nothing of HTTP serving or pages:
/// `pact-core` and `pact-node` may not depend on the web framework, the
/// middleware, the HTTP server or the templates, so a handler can never creep
/// below the faces (ARCHITECTURE.md).
#[test]
fn the_core_and_the_node_crates_do_not_depend_on_http_serving() {
    const SERVING: &[&str] = &[
        "axum",
        "tower",
        "tower-http",
        "hyper",
        "hyper-util",
        "askama",
        "pact-server",
    ];
    let meta = workspace_metadata();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if name != "pact-core" && name != "pact-node" {
            continue;
        }
        seen += 1;
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if d["kind"].as_str() != Some("dev") && SERVING.contains(&dep) {
                wrong.push(format!("{name} → {dep}"));
            }
        }
    }
    assert_eq!(seen, 2, "pact-core and pact-node are workspace members");
    assert!(wrong.is_empty(), "HTTP serving below the faces: {wrong:?}");
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

/// The domain rules (`pact-core/src/domain`) are plain functions (no HTTP,
/// no database, nothing but other rules). (The state the handlers share is
/// in pact-app, below every face: the crate graph above keeps it there.)
#[test]
fn domain_rules_import_nothing_above_them() {
    let core = workspace_root().join("crates/pact-core/src");
    let mut wrong = Vec::new();
    let rules = rust_files(&core.join("domain"));
    assert!(rules.len() > 10, "the domain rules are in pact-core");
    for file in rules {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(&core).unwrap().display().to_string();
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

/// A crate's top-level modules (a file or a folder under `src/`), each
/// with the other top-level modules its files name.
fn module_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = workspace_root().join("crates").join(krate).join("src");
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" {
            continue;
        }
        if path.is_dir() {
            files.entry(name).or_default().extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.entry(name).or_default().push(path);
        }
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, paths)| {
            let mut uses = BTreeSet::new();
            for p in paths {
                let text = std::fs::read_to_string(p).unwrap();
                uses.extend(
                    crate_modules(&text)
                        .into_iter()
                        .filter(|m| m != module && names.contains(m)),
                );
            }
            (module.clone(), uses)
        })
        .collect()
}

/// The strongly connected components of `graph` (Tarjan), those of more
/// than one module only: the import cycles.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on_stack.insert(v);
        let graph = w.graph;
        for u in graph.get(v).into_iter().flatten() {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.on_stack.contains(u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = BTreeSet::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                component.insert(u.to_owned());
                if u == v {
                    break;
                }
            }
            if component.len() > 1 {
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

/// Within each crate of the server side that has several top-level modules
/// (pact-pages has one, `web`, and pact-admin one, `admin`), they import one another in no cycle (issue
/// 29): in pact-app, `state.rs` names only the node's memory (pact-node,
/// pact-core) and the admission door; among the protocol faces, OAuth names
/// A2A and the gateway, A2A the gateway, never the other way; in pact-server
/// the router names the faces and nothing names the router. Across
/// crates the compiler forbids a loop. A new import that closes a loop fails
/// here with the loop's modules.
#[test]
fn the_server_crates_modules_import_in_no_cycle() {
    for (krate, two) in [
        ("pact-app", ["state", "consent"]),
        ("pact-protocol-faces", ["a2a", "merchant"]),
        ("pact-server", ["router", "serve"]),
    ] {
        let graph = module_graph(krate);
        assert!(
            two.iter().all(|m| graph.contains_key(*m)),
            "{krate}: {graph:?}"
        );
        let found = cycles(&graph);
        assert!(
            found.is_empty(),
            "import cycles among {krate}'s modules: {found:#?}"
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles_and_only_them() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &["a"][..]),
        ("e", &["e"][..]),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0],
        ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
    );
}
