//! `GET /logos/{sha256}` and `GET /theme/{rrggbb}.css`: the logos and the
//! brand accent the pages show, served from pactd's own origin so that the
//! page CSP (`img-src 'self'`, `style-src 'self'`) stays closed to other
//! sites and the person's browser never contacts a platform while deciding.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_node::node::Node;

use crate::who;

/// A logo's URL names its content, so it never changes: cache it for a year.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// An image or a stylesheet does not need to load anything itself.
const NOTHING: &str = "default-src 'none'; frame-ancestors 'none'; sandbox";

fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

fn fixed(mut res: Response, content_type: HeaderValue) -> Response {
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(IMMUTABLE));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(NOTHING),
    );
    // Set here too (the layer adds it everywhere) because the sniffed type is
    // the only thing that makes these bytes safe to serve.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

/// `GET /logos/{sha256}`: only names of the stored form reach the database.
pub async fn logo(State(node): State<Node>, Path(name): Path<String>) -> Response {
    if !who::is_logo_name(&name) {
        return not_found();
    }
    match pact_db::logos::get(&node.db, &name).await {
        Ok(Some(logo)) => {
            // The table only admits the four sniffed raster types.
            let Ok(ct) = HeaderValue::from_str(&logo.content_type) else {
                return not_found();
            };
            fixed(logo.bytes.into_response(), ct)
        }
        Ok(None) => not_found(),
        Err(e) => crate::web::page::PageError::from(e).into_response(),
    }
}

/// `GET /theme/{rrggbb}.css`: the accent's stylesheet, computed from the name.
pub async fn theme(Path(file): Path<String>) -> Response {
    let Some(css) = file.strip_suffix(".css").and_then(who::theme_css) else {
        return not_found();
    };
    fixed(
        css.into_response(),
        HeaderValue::from_static("text/css; charset=utf-8"),
    )
}
