//! The admin API, `/admin/api/v1/...` (JSON, `Authorization: Bearer` with an
//! admin API credential). One table, [`OPERATIONS`], both builds the routes
//! and generates the OpenAPI 3.1 document, so the two cannot drift.

pub mod agents;
pub mod audit;
pub mod brands;
pub mod caller;
pub mod customers;
pub mod error;
pub mod grants;
pub mod keys;
pub mod nodes;
pub mod openapi;
pub mod params;
pub mod staff;

use axum::Router;
use axum::routing::{MethodRouter, get, post};

use crate::admin::role::Role;
use crate::state::AppState;

pub const PREFIX: &str = "/admin/api/v1";

/// One operation of the API: how it is routed and how it is documented.
pub struct Operation {
    pub method: &'static str,
    /// Relative to [`PREFIX`], with `{name}` path parameters.
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// The least role that may call it.
    pub role: Role,
    /// Optional string query parameters: (name, description).
    pub query: &'static [(&'static str, &'static str)],
    /// The request body's schema (in `components/schemas`), if any.
    pub body: Option<&'static str>,
    /// The 200 response's schema.
    pub response: &'static str,
    pub route: fn() -> MethodRouter<AppState>,
}

const PAGE: (&str, &str) = ("cursor", "The `next_cursor` of the previous page.");
const LIMIT: (&str, &str) = ("limit", "Page size, 1–200 (default 50).");

pub const OPERATIONS: &[Operation] = &[
    Operation {
        method: "get",
        path: "/me",
        operation_id: "getMe",
        summary: "The calling credential: name, role, brand limit.",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "Me",
        route: || get(audit::me),
    },
    Operation {
        method: "get",
        path: "/grants",
        operation_id: "listGrants",
        summary: "Search grants, newest first.",
        role: Role::Viewer,
        query: &[
            ("brand", "Only this brand."),
            ("customer", "A customer's email, account id or subject."),
            ("agent", "The agent platform's issuer."),
            ("state", "active, revoked or expired."),
            PAGE,
            LIMIT,
        ],
        body: None,
        response: "GrantPage",
        route: || get(grants::list),
    },
    Operation {
        method: "get",
        path: "/grants/{id}",
        operation_id: "getGrant",
        summary: "One grant: scopes, authorization details, approval, receipts.",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "GrantDetail",
        route: || get(grants::get),
    },
    Operation {
        method: "get",
        path: "/grants/{id}/receipts",
        operation_id: "exportGrantReceipts",
        summary: "The grant's receipts as a file checked offline: each `{jws, claims}` with where the brand's keys are published (PACT §5.6).",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "ReceiptExport",
        route: || get(grants::receipts),
    },
    Operation {
        method: "post",
        path: "/grants/{id}/revoke",
        operation_id: "revokeGrant",
        summary: "Revoke one grant, on every node at once (PACT §5.7).",
        role: Role::Operator,
        query: &[],
        body: Some("Reason"),
        response: "Revoked",
        route: || post(grants::revoke),
    },
    Operation {
        method: "get",
        path: "/customers",
        operation_id: "findCustomers",
        summary: "Find brand customers by email, account id or external id.",
        role: Role::Viewer,
        query: &[
            ("q", "Email, account id or external id (exact). Required."),
            ("brand", "Only this brand."),
        ],
        body: None,
        response: "CustomerList",
        route: || get(customers::find),
    },
    Operation {
        method: "get",
        path: "/customers/{id}",
        operation_id: "getCustomer",
        summary: "One customer: second factors, lock state, live grants.",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "Customer",
        route: || get(customers::get),
    },
    Operation {
        method: "post",
        path: "/customers/{id}/revoke-grants",
        operation_id: "revokeCustomerGrants",
        summary: "Revoke every live grant of one customer.",
        role: Role::Operator,
        query: &[],
        body: Some("Reason"),
        response: "CustomerRevoked",
        route: || post(grants::revoke_for_customer),
    },
    Operation {
        method: "post",
        path: "/customers/{id}/unlock",
        operation_id: "unlockCustomer",
        summary: "Clear the customer's sign-in lock.",
        role: Role::Operator,
        query: &[],
        body: None,
        response: "CustomerChanged",
        route: || post(customers::unlock),
    },
    Operation {
        method: "post",
        path: "/customers/{id}/reset-second-factors",
        operation_id: "resetCustomerSecondFactors",
        summary: "Remove the customer's authenticator app, passkeys and recovery codes; signs them out.",
        role: Role::Operator,
        query: &[],
        body: None,
        response: "CustomerChanged",
        route: || post(customers::reset_second_factors),
    },
    Operation {
        method: "post",
        path: "/customers/{id}/sign-out",
        operation_id: "signOutCustomer",
        summary: "End every browser session of the customer.",
        role: Role::Operator,
        query: &[],
        body: None,
        response: "CustomerChanged",
        route: || post(customers::sign_out),
    },
    Operation {
        method: "get",
        path: "/agents",
        operation_id: "listAgents",
        summary: "Registered agent platforms with their live grants and people.",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "AgentList",
        route: || get(agents::list),
    },
    Operation {
        method: "post",
        path: "/agents",
        operation_id: "registerAgent",
        summary: "Register an agent platform (or move it to a new JWKS URI).",
        role: Role::Owner,
        query: &[],
        body: Some("AgentRegistration"),
        response: "Agent",
        route: || post(agents::register),
    },
    Operation {
        method: "post",
        path: "/agents/disable",
        operation_id: "disableAgent",
        summary: "Disable a platform and revoke every grant it holds.",
        role: Role::Operator,
        query: &[],
        body: Some("AgentDisable"),
        response: "AgentToggled",
        route: || post(agents::disable),
    },
    Operation {
        method: "post",
        path: "/agents/enable",
        operation_id: "enableAgent",
        summary: "Admit a disabled platform again (revoked grants stay revoked).",
        role: Role::Operator,
        query: &[],
        body: Some("AgentToggle"),
        response: "AgentToggled",
        route: || post(agents::enable),
    },
    Operation {
        method: "get",
        path: "/admins",
        operation_id: "listAdmins",
        summary: "Console accounts: email, role, brands, second factor.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "AdminList",
        route: || get(staff::list_admins),
    },
    Operation {
        method: "get",
        path: "/credentials",
        operation_id: "listCredentials",
        summary: "API credentials: name, role, brands, last use (never a secret).",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "CredentialList",
        route: || get(staff::list_credentials),
    },
    Operation {
        method: "post",
        path: "/credentials/{name}/revoke",
        operation_id: "revokeCredential",
        summary: "Revoke an API credential: refused from the next request on.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "CredentialRevoked",
        route: || post(staff::revoke_credential),
    },
    Operation {
        method: "get",
        path: "/brands",
        operation_id: "listBrands",
        summary: "The caller's brands, each with its scopes and grant lifetime.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "BrandList",
        route: || get(brands::list),
    },
    Operation {
        method: "get",
        path: "/brands/{brand}",
        operation_id: "getBrand",
        summary: "One brand: its scopes (id, description shown on consent, requires MFA) and grant lifetime.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "Brand",
        route: || get(brands::get),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/scopes",
        operation_id: "upsertBrandScope",
        summary: "Add a scope to the brand, or change its description and MFA requirement (as `pactd brand scope add`).",
        role: Role::Owner,
        query: &[],
        body: Some("ScopeDefinition"),
        response: "Brand",
        route: || post(brands::put_scope),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/scopes/{scope}/remove",
        operation_id: "removeBrandScope",
        summary: "Stop offering a scope; grants holding it keep it until they end or are revoked.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "Brand",
        route: || post(brands::remove_scope),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/card",
        operation_id: "setBrandCardText",
        summary: "What the brand's Agent Card says of it: its name and description (as `pactd brand set --name --description`).",
        role: Role::Owner,
        query: &[],
        body: Some("CardText"),
        response: "Brand",
        route: || post(brands::set_card_text),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/grant-lifetime",
        operation_id: "setBrandGrantLifetime",
        summary: "How long the brand's new grants last, 1–365 days, or null for the server default (as `pactd brand set --grant-ttl-days`).",
        role: Role::Owner,
        query: &[],
        body: Some("GrantLifetime"),
        response: "Brand",
        route: || post(brands::set_grant_lifetime),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/details-types",
        operation_id: "upsertBrandDetailsType",
        summary: "Declare or replace an RFC 9396 authorization_details type of the brand (as `pactd brand details-type add`).",
        role: Role::Owner,
        query: &[],
        body: Some("DetailsTypeDefinition"),
        response: "Brand",
        route: || post(brands::put_details_type),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/details-types/{type}/remove",
        operation_id: "removeBrandDetailsType",
        summary: "Stop accepting an authorization_details type; grants holding entries of it keep them and stay limited by them. Refused while a tool rule needs the type.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "Brand",
        route: || post(brands::remove_details_type),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/tools",
        operation_id: "upsertBrandTool",
        summary: "Add or replace a tool the brand's own agent calls through pactd's gateway (as `pactd brand tool add`).",
        role: Role::Owner,
        query: &[],
        body: Some("ToolDefinition"),
        response: "Brand",
        route: || post(brands::put_tool),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/tools/{tool}/rules",
        operation_id: "setBrandToolRules",
        summary: "Set a tool's limit rules and summary, e.g. of a tool imported from the merchant's MCP server (as `pactd brand tool set-rules`). Existing grants keep the rules they were approved under.",
        role: Role::Owner,
        query: &[],
        body: Some("ToolRules"),
        response: "Brand",
        route: || post(brands::set_tool_rules),
    },
    Operation {
        method: "post",
        path: "/brands/{brand}/tools/{tool}/remove",
        operation_id: "removeBrandTool",
        summary: "Remove a tool and its enforce rules (grants approved while it existed keep them).",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "Brand",
        route: || post(brands::remove_tool),
    },
    Operation {
        method: "get",
        path: "/keys",
        operation_id: "listKeys",
        summary: "The Provider's signing keys: kid, status (active, published for verification, retired) and times; never private material.",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "KeyList",
        route: || get(keys::list),
    },
    Operation {
        method: "post",
        path: "/keys/rotate",
        operation_id: "rotateKey",
        summary: "Rotate the signing key as `pactd keys rotate` does: the new key is published now and signs after the overlap; older keys stay published for verification.",
        role: Role::Owner,
        query: &[],
        body: None,
        response: "Key",
        route: || post(keys::rotate),
    },
    Operation {
        method: "get",
        path: "/nodes",
        operation_id: "listNodes",
        summary: "The pactd nodes on this database (heartbeat every 10 s) and whether each listens for revocations (PACT §5.7).",
        role: Role::Viewer,
        query: &[],
        body: None,
        response: "NodeList",
        route: || get(nodes::list),
    },
    Operation {
        method: "get",
        path: "/audit",
        operation_id: "listAudit",
        summary: "The audit log, newest first.",
        role: Role::Viewer,
        query: &[
            ("actor", "An admin's email or a credential's name."),
            (
                "action",
                "An exact action, or a prefix ending in '.' (grant.).",
            ),
            ("target", "The object acted on."),
            ("brand", "Only this brand."),
            PAGE,
            LIMIT,
        ],
        body: None,
        response: "AuditPage",
        route: || get(audit::list),
    },
];

/// The API's routes under [`PREFIX`]; an unknown path under it is a JSON 404.
pub fn routes() -> Router<AppState> {
    let mut api = Router::new().route("/openapi.json", get(openapi::serve));
    for op in OPERATIONS {
        api = api.route(op.path, (op.route)());
    }
    Router::new().nest(PREFIX, api.fallback(not_found))
}

async fn not_found() -> error::AdminApiError {
    error::AdminApiError::NotFound
}
