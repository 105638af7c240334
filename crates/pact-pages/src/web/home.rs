//! `GET /`: what this server is and where its parts are, so that an
//! operator's first look at a new node finds something (issue 33: a first
//! run used to answer 404 here). Nothing secret: the Agent Cards it points to
//! are public (PACT §2); without any brand yet it says how to add one.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::page::{PageError, render};
use pact_node::node::Node;

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    brand_name: String,
    signed_in: bool,
    has_brands: bool,
}

pub async fn home(State(node): State<Node>) -> Result<Response, PageError> {
    let has_brands = !pact_db::brands::list(&node.db).await?.is_empty();
    let page = HomePage {
        brand_name: node.config.provider_name.clone(),
        signed_in: false,
        has_brands,
    };
    Ok(render(&page, StatusCode::OK))
}
