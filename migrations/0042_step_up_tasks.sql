-- Step-up tasks a personal agent can follow (A2A 1.0 "Get Task", PACT §5.5:
-- the task may be ephemeral, or kept). Each row is the `auth-required` task
-- a turn returned, as it was returned, and the device authorization behind
-- its link. Its state is that authorization's (pending, approved, denied,
-- expired), so the task lives as long as the authorization row does
-- (housekeeping deletes it an hour after expiry; the cascade takes the task).
-- Who may read it is the authorization's brand, PA issuer and PA subject.
create table step_up_tasks (
    id                uuid primary key,
    authorization_id  uuid not null references device_authorizations (id) on delete cascade,
    task              jsonb not null,
    created_at        timestamptz not null
);
create index step_up_tasks_authorization on step_up_tasks (authorization_id);
