-- Indexes for the lookups whose cost would otherwise grow with a table, and
-- the change notifications that let every node cache rarely-changing rows
-- (docs/performance.md).

-- Housekeeping: stale claims are the few messages still without a reply.
create index messages_unreplied on messages (created_at) where reply is null;
-- Housekeeping: decided authorizations, by when they were decided.
create index device_authorizations_decided
    on device_authorizations ((coalesce(decided_at, created_at)))
    where status in ('redeemed', 'denied');
-- A node's revocation view is reloaded from the recent revocations only.
create index grants_revoked_at on grants (revoked_at) where revoked_at is not null;
-- Housekeeping and the account page.
create index sessions_user on sessions (user_id);
create index webauthn_ceremonies_expiry on webauthn_ceremonies (expires_at);
create index brand_assertion_jtis_expiry on brand_assertion_jtis (expires_at);

-- Every node keeps registered agents, brands, scopes and merchant agent
-- settings in memory; any change to them is announced on `pactd_config` so
-- each node drops its copy at once (the payload names the table).
create function pactd_notify_config() returns trigger language plpgsql as $$
begin
    perform pg_notify('pactd_config', tg_table_name);
    return null;
end;
$$;
create trigger agents_changed after insert or update or delete or truncate on agents
    for each statement execute function pactd_notify_config();
create trigger brands_changed after insert or update or delete or truncate on brands
    for each statement execute function pactd_notify_config();
create trigger brand_scopes_changed after insert or update or delete or truncate on brand_scopes
    for each statement execute function pactd_notify_config();
create trigger brand_tools_changed after insert or update or delete or truncate on brand_tools
    for each statement execute function pactd_notify_config();
create trigger brand_agents_changed after insert or update or delete or truncate on brand_agents
    for each statement execute function pactd_notify_config();
