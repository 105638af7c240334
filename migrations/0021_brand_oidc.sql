-- A brand whose customers sign in with the merchant's own OpenID provider
-- (OpenID Connect Core 1.0, authorization code flow with PKCE). One row per
-- brand in that mode; pactd discovers the endpoints from `issuer` at each
-- sign-in (OpenID Connect Discovery 1.0), so nothing else is stored about
-- the provider.
create table brand_oidc (
    brand_id              text primary key references brands (id) on delete cascade,
    issuer                text not null,
    client_id             text not null,
    -- the confidential client's secret, sealed with the master key
    client_secret_sealed  bytea not null,
    -- the scope requested at the provider (space-separated, includes openid)
    scope                 text not null default 'openid',
    -- the ID token claim that becomes the person's id at the brand
    user_claim            text not null default 'sub',
    -- acr values that count as a second factor
    mfa_acr               text[] not null default '{}',
    updated_at            timestamptz not null default now()
);

-- One trip of a browser to the provider: what the callback must find again.
-- Looked up by the hash of `state` and only for the session that started it
-- (login CSRF, RFC 9700 §4.7.1); single use (deleted as it is read).
create table brand_oidc_logins (
    state_hash              bytea primary key,
    session_hash            bytea not null references sessions (id_hash) on delete cascade,
    brand_id                text not null references brands (id) on delete cascade,
    device_authorization_id uuid not null references device_authorizations (id) on delete cascade,
    nonce                   text not null,
    -- RFC 7636 code_verifier: useless without the code, which only the
    -- browser's redirect carries
    code_verifier           text not null,
    -- the endpoints discovered when the trip began, used by the callback
    issuer                  text not null,
    token_endpoint          text not null,
    jwks_uri                text not null,
    -- a second factor was asked for (acr_values / prompt=login / max_age=0)
    mfa_requested           boolean not null default false,
    -- the ticks to bring back to the consent page after a step-up
    return_scopes           text not null default '',
    created_at              timestamptz not null default now(),
    expires_at              timestamptz not null
);
create index brand_oidc_logins_expiry on brand_oidc_logins (expires_at);
create index brand_oidc_logins_session on brand_oidc_logins (session_hash);

-- Which provider session a pactd session came from, so that a back-channel
-- logout (OpenID Connect Back-Channel Logout 1.0) can end it. Gone with the
-- session (rotation, sign-out, expiry).
create table brand_oidc_sessions (
    session_hash  bytea primary key references sessions (id_hash) on delete cascade,
    brand_id      text not null references brands (id) on delete cascade,
    provider_sub  text not null,
    sid           text
);
create index brand_oidc_sessions_sub on brand_oidc_sessions (brand_id, provider_sub);
create index brand_oidc_sessions_sid on brand_oidc_sessions (brand_id, sid) where sid is not null;
