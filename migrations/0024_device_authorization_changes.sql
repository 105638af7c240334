-- Each node answers polls of a pending device authorization from memory
-- (RFC 8628 §3.5; docs/performance.md). Whatever may end "pending" for a
-- code is announced here: a decision or the redemption (status), a step-up
-- take-over (another device code), another expiry (an operator's fix). Every
-- node then forgets that authorization at once and reads the database on the
-- next poll. The notification is sent at commit, and only for a change that
-- matters: a recorded poll changes none of these columns.
--
-- Deletes are not announced: housekeeping removes decided rows (announced
-- when decided) and expired ones, which a node answers as expired until it
-- drops them itself at the same age.
create function pactd_notify_device_authorization() returns trigger language plpgsql as $$
begin
    perform pg_notify('pactd_device_authorizations', old.id::text);
    return null;
end;
$$;
create trigger device_authorization_changed
    after update of status, device_code_hash, expires_at on device_authorizations
    for each row
    when (old.status is distinct from new.status
          or old.device_code_hash is distinct from new.device_code_hash
          or old.expires_at is distinct from new.expires_at)
    execute function pactd_notify_device_authorization();
