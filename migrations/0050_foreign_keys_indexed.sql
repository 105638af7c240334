-- Every foreign key whose parent rows are deleted in the normal course gets
-- an index that leads with its referencing columns.
--
-- Deleting a parent row makes PostgreSQL look for its children: with no
-- index on the child's column that is a sequential scan of the whole child
-- table, once for every parent row deleted. Measured here: deleting one row
-- of a table referenced by a million 600-byte rows took 354 ms. Before this
-- migration that was the cost of
--   * a delegated first turn that failed or was cut off (its context is
--     dropped: conversations::abandon_first_turn), scanning all receipts,
--     which a personal agent could repeat at will by dropping connections;
--   * each unverified agent the open door forgets (agents::prune_unverified,
--     under a flood of unknown issuers, PACT §3.1), scanning all
--     conversations, grants and device authorizations, and then all
--     receipts for each of its conversations;
--   * each device authorization the hourly sweep removes, scanning all
--     browser sessions and OpenID sign-ins.
--
-- Two indexes are the same keys in another order: an owner lookup names all
-- three columns, so the order serves it as well, and leading with the agent
-- serves the agent's cascade. The others are partial where most rows hold
-- no reference, so they cost nothing on the rows that hold none.
--
-- Left without an index, on purpose (tests/it/schema.rs lists them, with
-- why): references to brands (a brand is deleted by staff, once), to
-- logos and admins (small tables), and messages.grant_id (a grant is only
-- deleted with its agent, when it has no receipts; indexing it would cost
-- every delegated turn an index entry).
--
-- Upgrading: each index build reads its table once (receipts, conversations
-- and grants are the large ones), and writes to that table wait meanwhile.

create index receipts_by_conversation on receipts (conversation_id);

drop index conversations_owner;
create index conversations_owner on conversations (pa_issuer, brand_id, pa_sub);

drop index grants_owner;
create index grants_owner on grants (pa_issuer, brand_id, user_sub);

create index device_authorizations_agent on device_authorizations (pa_issuer);
create index device_authorizations_grant on device_authorizations (grant_id)
    where grant_id is not null;

create index sessions_device_authorization on sessions (device_authorization_id)
    where device_authorization_id is not null;
create index sessions_pending_user on sessions (pending_user_id)
    where pending_user_id is not null;

create index brand_oidc_logins_device_authorization
    on brand_oidc_logins (device_authorization_id);

create index webauthn_ceremonies_user on webauthn_ceremonies (user_id)
    where user_id is not null;
create index admin_sessions_pending_admin on admin_sessions (pending_admin_id)
    where pending_admin_id is not null;
