-- "Forgot your password?": one-time links sent by email. Only the SHA-256 of
-- the link's secret is stored, so a database leak yields no usable link.
-- A link dies when used, when it expires, when a newer password is set, and
-- with its account.
create table password_resets (
    token_hash  bytea primary key,
    user_id     uuid not null references users (id) on delete cascade,
    created_at  timestamptz not null,
    expires_at  timestamptz not null,
    used_at     timestamptz
);

-- How many links an account was sent lately (the per-account mail budget),
-- and "every link of this account dies" when a password is set.
create index password_resets_user_created on password_resets (user_id, created_at);
create index password_resets_expires_at on password_resets (expires_at);
