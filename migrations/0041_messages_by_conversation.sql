-- A webhook turn sends the merchant's agent its context's latest turns
-- (pact-db conversations::history: `where conversation_id = $1 and reply is
-- not null order by id desc limit 20`). With only the (conversation_id,
-- message_id) unique index, PostgreSQL walked the primary key backwards and
-- filtered, reading every message ever stored when the context had fewer
-- than 20 (measured: 5,900 rows read per turn after 19,000 turns, most of
-- a webhook turn's database CPU, growing with the table). This index gives
-- the context's turns newest first, at most 20 rows read.
create index messages_by_conversation on messages (conversation_id, id);
