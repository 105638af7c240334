-- Open admission of personal agents (PACT §3.1, issue 31). An agent a Provider
-- admitted under the `open` policy, after OpenID discovery of its keys and a
-- PA-JWT verified in full, is stored here as unverified: staff have not
-- looked at it. Agents registered by staff (`pactd agent add`) are verified.
alter table agents add column verified boolean not null default true;
-- The unverified are bounded in number (oldest idle forgotten first), so the
-- prune reads them by idleness.
create index agents_unverified on agents (issuer) where not verified;

-- When an unverified agent was last seen and how many requests it made, for
-- staff deciding whom to verify. Apart from `agents` because the change
-- trigger on `agents` drops every node's configuration copy: a sighting is
-- not a configuration change. Written at most once a minute per agent and
-- node (`admission.rs`).
create table agent_sightings (
    issuer        text primary key references agents (issuer) on delete cascade,
    first_seen_at timestamptz not null,
    last_seen_at  timestamptz not null,
    requests      bigint not null default 0 check (requests >= 0)
);
create index agent_sightings_idle on agent_sightings (last_seen_at);

-- Which of a brand's scopes an unverified agent may request (PACT §3.1 leaves
-- trust to the Provider; the default admits none beyond the identity profile).
alter table brand_scopes add column unverified_allowed boolean not null default false;
