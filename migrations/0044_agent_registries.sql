-- Trusted registries of personal agents (PACT §3.1: "a trusted-issuer
-- registry"; issue 31). A registry publishes a signed list (a compact JWS,
-- `pact-agent-registry+jwt`) at `url`; the merchant pins its public keys.
-- A node that finds a registry due claims it (moving `next_fetch_at`) before
-- fetching, so one node fetches each list per period.
create table agent_registries (
    name            text primary key check (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    url             text not null,
    -- The pinned verification keys, public JWKs (ES256, each with a kid).
    keys            jsonb not null check (jsonb_typeof(keys) = 'array'),
    refresh_seconds integer not null default 3600 check (refresh_seconds between 60 and 86400),
    created_at      timestamptz not null,
    next_fetch_at   timestamptz not null,
    -- What the last attempt did, for staff: the error when it failed.
    last_fetched_at timestamptz,
    last_error      text,
    -- The list in force: a list issued before it is refused (no rollback),
    -- and listed agents stop being admitted when it expires.
    list_issued_at  timestamptz,
    list_expires_at timestamptz,
    listed          integer not null default 0 check (listed >= 0)
);

-- An agent a registry listed carries the registry's name and the expiry of
-- the list that listed it; staff registering the issuer themselves clears
-- both (the agent is then staff's). An agent the registry stops listing, or
-- whose registry is removed, keeps its row (receipts refer to its grants,
-- and are never deleted) with `listed_until` set to that moment, so it is no
-- longer admitted and its grants are revoked; a later list may list it again.
-- No foreign key, for that reason: the name outlives the registry.
alter table agents add column registry text;
alter table agents add column listed_until timestamptz;
alter table agents add constraint agents_listed check ((registry is null) = (listed_until is null));
create index agents_by_registry on agents (registry) where registry is not null;

-- Hosts staff blocked (issue 31: "block an issuer, or every issuer of a
-- host"): no issuer on the host or under it (`evil.example` blocks
-- `a.evil.example`) is admitted under `open` or taken from a registry list,
-- and blocking disables the agents already stored there. Nodes keep the set
-- in memory, so the change trigger drops their copies.
create table blocked_hosts (
    host       text primary key check (host ~ '^[a-z0-9.-]{1,253}$' and host !~ '^\.|\.$'),
    reason     text not null,
    blocked_at timestamptz not null
);
create trigger blocked_hosts_changed after insert or update or delete or truncate on blocked_hosts
    for each statement execute function pactd_notify_config();

-- The host of an issuer URL, lower-cased (no port, no userinfo: issuers with
-- userinfo are refused before they are stored).
create function pactd_issuer_host(issuer text) returns text language sql immutable as $$
    select lower(substring(issuer from '^[A-Za-z][A-Za-z0-9+.-]*://([^/:?#]+)'))
$$;
-- Whether `host` is blocked: the host itself or any domain above it.
create function pactd_host_blocked(host text) returns boolean language sql stable as $$
    select exists (select 1 from blocked_hosts b where host = b.host or host like '%.' || b.host)
$$;

-- What an agent admitted under `open` says of itself in its discovery
-- document (`client_name`, `logo_uri`, as RFC 7591 §2 names them), shown to
-- staff deciding whom to verify, and only to them: people on consent see the
-- issuer's host until staff verify the agent. The logo is not fetched.
alter table agent_sightings add column claimed_name text check (char_length(claimed_name) <= 100);
alter table agent_sightings add column claimed_logo_uri text check (char_length(claimed_logo_uri) <= 2048);
