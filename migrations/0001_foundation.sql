-- pactd foundation: brands, registered personal agents, conversations, messages.
-- Later migrations add users, grants, tokens and receipts; the columns marked
-- "later" are here so those fit without reshaping these tables.

create table brands (
    id           text primary key check (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name         text not null check (length(name) between 1 and 200),
    description  text not null default '',
    -- which BrandAgent answers for this brand: 'demo' (built in) or, later, 'webhook'
    agent_kind   text not null default 'demo',
    -- per-brand settings that are not worth a column (grant lifetime, MFA policy, ...)
    settings     jsonb not null default '{}'::jsonb,
    created_at   timestamptz not null default now()
);

-- A registered personal-agent platform (PACT §3). The issuer is compared as an exact string.
create table agents (
    issuer      text primary key check (length(issuer) between 1 and 2048),
    jwks_uri    text not null check (length(jwks_uri) between 1 and 2048),
    name        text not null,
    enabled     boolean not null default true,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now()
);

-- A conversation (A2A context) belongs to exactly one (brand, PA issuer, PA sub) (PACT §4).
create table conversations (
    id          uuid primary key,
    brand_id    text not null references brands (id) on delete cascade,
    pa_issuer   text not null references agents (issuer) on delete cascade,
    pa_sub      text not null,
    -- the brand user the context has run as under delegation (PACT §5.5); null until then
    user_sub    text,
    closed      boolean not null default false,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now()
);
create index conversations_owner on conversations (brand_id, pa_issuer, pa_sub);

-- One user message and the reply stored for it, so a retried messageId gets the same reply (PACT §4).
create table messages (
    id                bigint generated always as identity primary key,
    conversation_id   uuid not null references conversations (id) on delete cascade,
    message_id        text not null,
    request_text      text not null,
    -- null while the turn is running (a retry then gets INVALID_PARAMS)
    reply_message_id  text,
    reply             jsonb,
    -- later: the grant the turn ran under (delegated profile)
    grant_id          uuid,
    created_at        timestamptz not null default now(),
    replied_at        timestamptz,
    unique (conversation_id, message_id)
);
