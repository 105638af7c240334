-- Staff second factors beyond TOTP: passkeys (WebAuthn) and single-use
-- recovery codes, kept apart from the customers' (`webauthn_credentials`,
-- `recovery_codes`) as staff accounts are apart from customer accounts.

-- A console account's passkeys. The WebAuthn user handle is `admins.id`.
create table admin_passkeys (
    id             uuid primary key,
    admin_id       uuid not null references admins (id) on delete cascade,
    credential_id  bytea not null unique,
    -- webauthn-rs's Passkey, serialised (public key and counter: no secret)
    passkey        jsonb not null,
    name           text not null default 'Passkey' check (length(name) between 1 and 64),
    created_at     timestamptz not null default now(),
    last_used_at   timestamptz
);
create index admin_passkeys_admin on admin_passkeys (admin_id);

-- Single-use recovery codes, stored as SHA-256 (about 50 random bits each,
-- and a wrong one counts as a failed sign-in towards the account's lock).
create table admin_recovery_codes (
    admin_id   uuid not null references admins (id) on delete cascade,
    code_hash  bytea not null,
    used_at    timestamptz,
    primary key (admin_id, code_hash)
);

-- Console ceremonies live with the customers' (any node finishes a ceremony
-- another started, and the sweep removes expired ones), under kinds of their
-- own so a ceremony of one side can never be finished on the other.
alter table webauthn_ceremonies drop constraint webauthn_ceremonies_kind_check;
alter table webauthn_ceremonies add constraint webauthn_ceremonies_kind_check
    check (kind in ('register', 'authenticate', 'admin_register', 'admin_authenticate'));
