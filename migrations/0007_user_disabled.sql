-- A customer account an operator disabled: it cannot sign in, its sessions
-- are gone and its grants were revoked when it was disabled.
alter table users add column disabled_at timestamptz;
