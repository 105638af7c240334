-- The merchant's own agent and systems behind pactd: a brand answered by a
-- webhook agent, its webhook signing secrets, the tools its agent may call
-- through the gateway, and API credentials for RFC 7662 introspection.

-- Where a brand with agent_kind = 'webhook' is reached, and how long we wait.
create table brand_agents (
    brand_id         text primary key references brands (id) on delete cascade,
    url              text not null check (length(url) between 1 and 2048),
    agent_timeout_ms integer not null default 20000 check (agent_timeout_ms between 100 and 25000),
    tool_timeout_ms  integer not null default 10000 check (tool_timeout_ms between 100 and 25000),
    updated_at       timestamptz not null default now()
);

-- Standard Webhooks signing secrets, sealed with the master key (aad: brand
-- id and row id). retired_at null = the current secret; a retired secret
-- still signs (a second signature) until retired_at, the rotation's grace.
create table brand_webhook_secrets (
    id          uuid primary key,
    brand_id    text not null references brands (id) on delete cascade,
    sealed      bytea not null,
    created_at  timestamptz not null default now(),
    retired_at  timestamptz
);
create unique index brand_webhook_secrets_one_current
    on brand_webhook_secrets (brand_id) where retired_at is null;

-- The tools a brand's agent may call through the gateway. scope null = public.
create table brand_tools (
    brand_id     text not null references brands (id) on delete cascade,
    name         text not null check (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    scope        text,
    url          text not null check (length(url) between 1 and 2048),
    description  text not null default '',
    -- the --enforce FIELD=ARG pairs, as given (the rules themselves live in the
    -- brand's authorization_details types, where the gate reads them)
    enforce      jsonb not null default '[]'::jsonb,
    input_schema jsonb,
    created_at   timestamptz not null default now(),
    primary key (brand_id, name)
);

-- Brand API credentials (RFC 7662 §2.1 client authentication). The secret is
-- 32 random bytes, stored only as its SHA-256.
create table brand_api_credentials (
    client_id    text primary key,
    brand_id     text not null references brands (id) on delete cascade,
    name         text not null check (length(name) between 1 and 200),
    secret_hash  bytea not null,
    created_at   timestamptz not null default now(),
    revoked_at   timestamptz
);
create index brand_api_credentials_brand on brand_api_credentials (brand_id);
