//! `sqlx::migrate!` embeds the files of `migrations/` when pact-db compiles,
//! and cargo rebuilds pact-db when one of those files changes; a file added
//! to the directory is not one of them, so without this a new migration was
//! silently left out of every build until something else touched pact-db.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
