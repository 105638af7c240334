-- The Delegated profile (PACT §5): brand scopes, the Provider's signing keys,
-- device authorizations (RFC 8628), grants, refresh tokens, receipts, and the
-- demo brand's order data.

-- A brand's scopes (PACT §5: the brand defines them; consent shows the description verbatim).
-- Scope ids are RFC 6749 §3.3 scope-tokens: printable ASCII without space, '"' or '\'.
create table brand_scopes (
    brand_id      text not null references brands (id) on delete cascade,
    scope_id      text not null check (scope_id ~ '^[!#-\[\]-~]{1,128}$'),
    description   text not null check (length(description) between 1 and 500),
    -- consenting to this scope demands a second factor in the session (browser issue)
    requires_mfa  boolean not null default false,
    created_at    timestamptz not null default now(),
    primary key (brand_id, scope_id)
);

-- The Provider's ES256 signing keys. The private key is sealed (AES-256-GCM) with the
-- key-encryption key from configuration; the table never holds it in the clear.
create table signing_keys (
    kid             text primary key,
    public_jwk      jsonb not null,
    private_sealed  bytea not null,
    created_at      timestamptz not null default now(),
    -- published from created_at; signs from activates_at (the overlap lets caches pick it up first)
    activates_at    timestamptz not null,
    -- set when a newer key takes over signing
    retired_at      timestamptz,
    -- dropped from the JWKS after everything it signed can have expired
    unpublish_at    timestamptz
);

-- Grants: what a user allowed one PA at one brand (PACT §5.2–5.3).
create table grants (
    id                     uuid primary key,
    brand_id               text not null references brands (id) on delete cascade,
    pa_issuer              text not null references agents (issuer) on delete cascade,
    -- the user's id at the brand: the delegation token's `sub`
    user_sub               text not null,
    scopes                 text[] not null,
    authorization_details  jsonb,
    created_at             timestamptz not null default now(),
    expires_at             timestamptz not null,
    last_used_at           timestamptz,
    revoked_at             timestamptz,
    revoked_reason         text
);
create index grants_owner on grants (brand_id, pa_issuer, user_sub);
create index grants_user on grants (brand_id, user_sub);

-- RFC 8628 device authorizations. The device code is a bearer secret of the PA alone:
-- only its SHA-256 is stored.
create table device_authorizations (
    id                     uuid primary key,
    brand_id               text not null references brands (id) on delete cascade,
    pa_issuer              text not null references agents (issuer) on delete cascade,
    pa_sub                 text not null,
    device_code_hash       bytea not null unique,
    -- normalised: 8 letters of BCDFGHJKLMNPQRSTVWXZ, no dash
    user_code              text not null check (user_code ~ '^[BCDFGHJKLMNPQRSTVWXZ]{8}$'),
    scopes                 text[] not null,
    authorization_details  jsonb,
    status                 text not null default 'pending'
                           check (status in ('pending', 'approved', 'denied', 'redeemed')),
    interval_secs          integer not null,
    last_polled_at         timestamptz,
    expires_at             timestamptz not null,
    created_at             timestamptz not null default now(),
    -- where the request came from, shown on consent (RFC 8628 §5.4 remote phishing)
    request_ip             text,
    -- 'step_up': created by pactd for a step-up task's link; the PA's next device
    -- authorization for the same scopes takes it over (see device_authorization.rs)
    origin                 text not null default 'client' check (origin in ('client', 'step_up')),
    decided_at             timestamptz,
    user_sub               text,
    grant_id               uuid references grants (id) on delete cascade
);
-- A user code identifies at most one live authorization.
create unique index device_authorizations_live_user_code
    on device_authorizations (user_code) where status in ('pending', 'approved');
create index device_authorizations_expiry on device_authorizations (expires_at);

-- Refresh tokens: opaque, stored hashed, single use (RFC 9700 §4.14.2 rotation).
create table refresh_tokens (
    token_hash   bytea primary key,
    grant_id     uuid not null references grants (id) on delete cascade,
    created_at   timestamptz not null default now(),
    expires_at   timestamptz not null,
    used_at      timestamptz
);
create index refresh_tokens_grant on refresh_tokens (grant_id);

-- Receipts (PACT §5.6), chained per grant. Append-only: a trigger refuses change.
create table receipts (
    id               bigint generated always as identity primary key,
    grant_id         uuid not null references grants (id),
    seq              integer not null,
    conversation_id  uuid not null references conversations (id),
    message_id       text not null,
    jws              text not null,
    claims           jsonb not null,
    created_at       timestamptz not null default now(),
    unique (grant_id, seq)
);

create function pactd_append_only() returns trigger language plpgsql as $$
begin
    raise exception 'table % is append-only', tg_table_name using errcode = 'insufficient_privilege';
end;
$$;
create trigger receipts_append_only before update or delete on receipts
    for each row execute function pactd_append_only();

alter table messages add constraint messages_grant_fk foreign key (grant_id) references grants (id);

-- Revocation is announced so every node's in-memory view drops the grant at once.
create function pactd_notify_revocation() returns trigger language plpgsql as $$
begin
    perform pg_notify('pactd_revocations', new.id::text);
    return null;
end;
$$;
create trigger grants_revoked after update of revoked_at on grants
    for each row when (old.revoked_at is null and new.revoked_at is not null)
    execute function pactd_notify_revocation();

-- The demo brand's shop data, seeded per user on first delegated use.
create table demo_orders (
    brand_id     text not null references brands (id) on delete cascade,
    user_sub     text not null,
    order_id     text not null,
    placed_on    date not null,
    items        text not null,
    total_cents  integer not null,
    status       text not null check (status in ('processing', 'shipped', 'delivered', 'cancelled')),
    primary key (brand_id, order_id)
);
create index demo_orders_user on demo_orders (brand_id, user_sub);

-- A new or retired signing key is announced so every node reloads its key set.
create function pactd_notify_keys() returns trigger language plpgsql as $$
begin
    perform pg_notify('pactd_keys', '');
    return null;
end;
$$;
create trigger signing_keys_changed after insert or update on signing_keys
    for each statement execute function pactd_notify_keys();

-- TRUNCATE bypasses row triggers; refuse it too.
create trigger receipts_no_truncate before truncate on receipts
    for each statement execute function pactd_append_only();
