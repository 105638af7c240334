-- The index of claims still without a reply (0010) was declared `where reply
-- is null`, the very condition a turn's store checks beside the message's
-- key (`conversation_id = $3 and message_id = $4 and reply is null`). The
-- planner could then answer that check with a bitmap AND of the unique key
-- and this partial index, and a bitmap scan reads every entry of the index,
-- the dead ones too: each claim leaves one behind when its reply is stored,
-- and only a vacuum removes it (a bitmap scan never marks entries dead the
-- way a plain index scan does). Measured on the load example: after 30,000
-- delegated turns each store read about 15,000 entries of this index, and a
-- delegated turn's PostgreSQL CPU grew with every turn since the last vacuum.
--
-- Declared on `replied_at`, which a reply always sets with `reply`
-- (pact-db conversations.rs), the index still serves the housekeeping sweep
-- of stale claims, and no turn's check can be proved to imply its predicate,
-- so no plan of a turn can read it.
drop index messages_unreplied;
create index messages_unreplied on messages (created_at) where replied_at is null;
