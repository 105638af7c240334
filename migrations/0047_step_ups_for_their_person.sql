-- PACT §5.5: a step-up asked in a delegated turn is for the person the turn
-- acted for. Its link reached whoever the personal agent showed it to, and
-- anyone signed in at the brand with its code could approve it in their own
-- name: the personal agent then collected a grant for the wrong account.
-- The person the step-up is for is kept with it, and only they see and
-- decide it (pact-app consent.rs, is_for). Null for a personal agent's own
-- request (RFC 8628 §3.1: the device does not know who will approve) and
-- for a step-up in a turn without delegation.
alter table device_authorizations add column for_user_sub text;
