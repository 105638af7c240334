-- The merchant's staff: console accounts, API credentials, console sessions
-- and the audit log. Staff accounts are separate from brand customers
-- (`users`): a customer can never sign in to the console and a staff member
-- has no brand account.

-- Console accounts. `brands` null: every brand; otherwise only these, and
-- anything outside them answers as if it did not exist.
create table admins (
    id                  uuid primary key,
    email               text not null unique check (email = lower(email) and length(email) between 3 and 254),
    -- argon2id (accounts/password.rs)
    password_hash       text not null,
    -- RFC 6238 secret, sealed with the master key (aad: 'pactd admin totp' and the admin id)
    totp_secret_sealed  bytea,
    -- the last accepted time step: a code is usable once (RFC 6238 §5.2)
    totp_last_step      bigint,
    role                text not null check (role in ('owner', 'operator', 'viewer')),
    brands              text[] check (brands is null or cardinality(brands) > 0),
    failed_logins       integer not null default 0,
    locked_until        timestamptz,
    disabled_at         timestamptz,
    created_at          timestamptz not null default now()
);

-- Admin API credentials: the secret is shown once and stored as its SHA-256
-- (256 random bits: nothing to brute-force, so a plain hash suffices).
create table admin_credentials (
    id            uuid primary key,
    name          text not null unique check (length(name) between 1 and 64),
    role          text not null check (role in ('owner', 'operator', 'viewer')),
    brands        text[] check (brands is null or cardinality(brands) > 0),
    secret_hash   bytea not null unique,
    created_at    timestamptz not null default now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- Console sessions. Only the SHA-256 of the cookie value is stored; a new id
-- is issued at every rise of the authentication state (session fixation).
create table admin_sessions (
    id_hash           bytea primary key,
    csrf_token        text not null,
    -- signed in (password and second factor) ...
    admin_id          uuid references admins (id) on delete cascade,
    -- ... or password accepted, second factor (or its enrolment) to come
    pending_admin_id  uuid references admins (id) on delete cascade,
    mfa_at            timestamptz,
    created_at        timestamptz not null default now(),
    expires_at        timestamptz not null,
    check (admin_id is null or pending_admin_id is null)
);
create index admin_sessions_expiry on admin_sessions (expires_at);
create index admin_sessions_admin on admin_sessions (admin_id);

-- Every admin action and security event. `detail` never holds a secret.
-- `brand_id` lets a brand-limited admin see only its brands' entries.
create table audit_log (
    id           bigserial primary key,
    at           timestamptz not null default now(),
    actor_kind   text not null check (actor_kind in ('admin', 'credential', 'cli', 'customer', 'agent', 'system')),
    actor        text not null,
    action       text not null,
    target       text,
    brand_id     text,
    detail       jsonb not null default '{}'::jsonb,
    client_addr  text
);
create index audit_log_at on audit_log (at desc, id desc);
create index audit_log_action on audit_log (action, at desc);

-- Revocations that do not pass through the admin code (a customer on the
-- account page, a personal agent through RFC 7009) are written to the audit
-- log here, so the log is complete whichever node or path revoked. Staff
-- revocations are logged by the code that makes them, with the staff name.
create function pactd_audit_revocation() returns trigger language plpgsql as $$
begin
    if new.revoked_reason = 'revoked by the user on the account page' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('customer', new.user_sub, 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('agent', new.pa_issuer, 'reason', new.revoked_reason));
    elsif new.revoked_reason = 'revoked by the personal agent' then
        insert into audit_log (actor_kind, actor, action, target, brand_id, detail)
        values ('agent', new.pa_issuer, 'grant.revoke', new.id::text, new.brand_id,
                jsonb_build_object('customer', new.user_sub, 'reason', new.revoked_reason));
    end if;
    return null;
end $$;

create trigger grants_revoked_audit after update of revoked_at on grants
    for each row when (old.revoked_at is null and new.revoked_at is not null)
    execute function pactd_audit_revocation();
