-- Failed password sign-ins, counted by a hash of the key (brand and email,
-- or brand, email and client address) whether or not an account has that
-- email: the lockout must not tell which accounts exist. No email is stored.
create table sign_in_failures (
    key_hash bytea primary key,
    failed integer not null,
    locked_until timestamptz,
    updated_at timestamptz not null
);

create index sign_in_failures_updated_at on sign_in_failures (updated_at);
