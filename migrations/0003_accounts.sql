-- The browser side: brand customers' accounts, second factors, sessions, and
-- the single-use assertions of brands that bring their own login (PACT §5.2).

create table users (
    id                  uuid primary key,
    brand_id            text not null references brands (id) on delete cascade,
    -- stored lower-cased; unique per brand
    email               text not null check (email = lower(email) and length(email) between 3 and 254),
    -- the id the brand's other channels use; the delegation token's `sub` when set
    external_id         text check (length(external_id) between 1 and 256),
    password_hash       text,
    -- RFC 6238 secret, sealed with the master key (aad: the user id)
    totp_secret_sealed  bytea,
    -- the last accepted time step: a code is usable once (RFC 6238 §5.2)
    totp_last_step      bigint,
    failed_logins       integer not null default 0,
    locked_until        timestamptz,
    created_at          timestamptz not null default now(),
    unique (brand_id, email),
    unique (brand_id, external_id)
);

create table webauthn_credentials (
    id             uuid primary key,
    user_id        uuid not null references users (id) on delete cascade,
    credential_id  bytea not null unique,
    -- webauthn-rs's Passkey, serialised
    passkey        jsonb not null,
    name           text not null default 'Passkey',
    created_at     timestamptz not null default now(),
    last_used_at   timestamptz
);
create index webauthn_credentials_user on webauthn_credentials (user_id);

-- Single-use recovery codes, stored as SHA-256.
create table recovery_codes (
    user_id    uuid not null references users (id) on delete cascade,
    code_hash  bytea not null,
    used_at    timestamptz,
    primary key (user_id, code_hash)
);

-- Browser sessions. Only the SHA-256 of the cookie value is stored; a new id is
-- issued at every sign-in (session fixation).
create table sessions (
    id_hash                 bytea primary key,
    csrf_token              text not null,
    brand_id                text references brands (id) on delete cascade,
    -- signed in with a built-in account ...
    user_id                 uuid references users (id) on delete cascade,
    -- ... or through the brand's own login (the asserted subject)
    external_sub            text,
    -- password verified, second factor still to come
    pending_user_id         uuid references users (id) on delete cascade,
    -- when a second factor was last verified in this session (step-up authentication)
    mfa_at                  timestamptz,
    -- the device authorization this browser is deciding on
    device_authorization_id uuid references device_authorizations (id) on delete set null,
    created_at              timestamptz not null default now(),
    last_seen_at            timestamptz not null default now(),
    expires_at              timestamptz not null
);
create index sessions_expiry on sessions (expires_at);

-- WebAuthn ceremony state, server-side so that any node can finish a ceremony.
create table webauthn_ceremonies (
    id            uuid primary key,
    session_hash  bytea not null,
    kind          text not null check (kind in ('register', 'authenticate')),
    user_id       uuid references users (id) on delete cascade,
    state         jsonb not null,
    expires_at    timestamptz not null
);

-- `jti`s of brand login assertions already used (PACT §5.2: single use).
create table brand_assertion_jtis (
    brand_id    text not null references brands (id) on delete cascade,
    jti         text not null,
    expires_at  timestamptz not null,
    primary key (brand_id, jti)
);
