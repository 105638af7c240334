-- A grant that is deleted while live is announced as a revocation, as one
-- whose revoked_at is set (0002). Grants go by cascade when staff forget an
-- agent admitted under `open`, when housekeeping prunes such agents, and when
-- an agent, a brand or an account is removed; without this, a node that
-- checks tokens from memory would go on accepting the grant's delegation
-- tokens until they expire.
create function pactd_notify_grant_deleted() returns trigger language plpgsql as $$
begin
    perform pg_notify('pactd_revocations', old.id::text);
    return null;
end;
$$;
create trigger grants_deleted after delete on grants
    for each row when (old.revoked_at is null)
    execute function pactd_notify_grant_deleted();
