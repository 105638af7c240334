-- Any node serves any request of a turn (a plain round-robin proxy in front
-- of several nodes works). A turn runs on the node that called the
-- merchant's agent; its tool calls may arrive at any node. The turn token
-- carries what they need, signed (pact-server merchant/turn_token.rs); this
-- row is what the nodes share about the turn while it runs:
--
-- * a call on another node enters (in_flight + 1) only while the turn has
--   not ended, and leaves (in_flight - 1) with what it did (`records`, for
--   the receipt), in one statement each;
-- * the turn's own node ends it (ended = true), waits for in_flight to reach
--   0, and puts `records` into the turn's receipt;
-- * an MCP session ended (DELETE) on one node is refused on every other.
--
-- Rows are written without waiting for the WAL flush (pact-db's relaxed
-- pool): a crash loses the turn they belong to as well. Housekeeping
-- removes them an hour after the turn's token expired.
create table turn_fences (
    turn_id          uuid primary key,
    ended            boolean not null default false,
    in_flight        integer not null default 0 check (in_flight >= 0),
    records          jsonb not null default '[]'::jsonb,
    closed_sessions  text[] not null default '{}',
    expires_at       timestamptz not null
);
create index turn_fences_expiry on turn_fences (expires_at);
