-- The audit log misses nothing and loses nothing (issue 28, finding 3).
--
-- 1. Append-only, like `receipts` (0002) and the receipt log (0018): an
--    entry can be added, never changed or removed, not even by TRUNCATE
--    (which bypasses row triggers). Whoever wants to hide what they did
--    must first drop the trigger, which needs the table's owner and is
--    itself visible in the schema.
create trigger audit_log_append_only before update or delete on audit_log
    for each row execute function pactd_append_only();
create trigger audit_log_no_truncate before truncate on audit_log
    for each statement execute function pactd_append_only();

-- 2. Every grant that ends by revocation leaves an entry, whoever or
--    whatever ended it. Staff revocations (every reason starting with
--    'revoked by an administrator', as pact_db::grants::reason::by_admin
--    writes it) are recorded by the code that makes them, in the same
--    transaction and with the staff member's name and address; everything
--    else is recorded here, so a revocation path added later cannot slip
--    past the log: the customer on the account page or deleting their
--    account, the personal agent (RFC 7009), and the automatic ones, a
--    reused refresh token (RFC 9700 §4.14.2) and a grant superseded by the
--    newer one the same person gave the same agent. A reason this function
--    does not know is recorded too, under the system actor.
create or replace function pactd_audit_revocation() returns trigger language plpgsql as $$
declare
    newer uuid;
begin
    if new.revoked_reason like 'revoked by an administrator%' then
        return null;
    elsif new.revoked_reason = 'revoked by the user on the account page' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('customer', new.user_sub, 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('agent', new.pa_issuer, 'reason', new.revoked_reason));
    elsif new.revoked_reason = 'the person deleted their account' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('customer', new.user_sub, 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('agent', new.pa_issuer, 'reason', new.revoked_reason));
    elsif new.revoked_reason = 'revoked by the personal agent' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('agent', new.pa_issuer, 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('customer', new.user_sub, 'reason', new.revoked_reason));
    elsif new.revoked_reason = 'refresh token reuse' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('system', 'pactd', 'grant.revoke_token_reuse', new.id::text, new.brand_id,
                jsonb_build_object('customer', new.user_sub, 'agent', new.pa_issuer,
                                   'reason', new.revoked_reason));
    elsif new.revoked_reason = 'superseded by a wider grant' then
        -- The grant whose redemption ended this one: the newest live grant
        -- of the same person for the same agent at the same brand.
        select id into newer from grants
         where brand_id = new.brand_id and pa_issuer = new.pa_issuer
           and user_sub = new.user_sub and id <> new.id and revoked_at is null
         order by created_at desc limit 1;
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('system', 'pactd', 'grant.superseded', new.id::text, new.brand_id,
                jsonb_build_object('customer', new.user_sub, 'agent', new.pa_issuer,
                                   'reason', new.revoked_reason, 'superseded_by', newer));
    else
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('system', 'pactd', 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('customer', new.user_sub, 'agent', new.pa_issuer,
                                   'reason', new.revoked_reason));
    end if;
    return null;
end $$;
