-- PACT §4: a retried messageId gets the stored reply without running the
-- agent again. A first message has no contextId yet, and its retry (a
-- personal agent that lost the reply never learned the context's id) came
-- without one too: it started a second conversation and ran the agent a
-- second time, which for a turn that acts (a merchant's tool, a delegated
-- change) did the thing twice. The first message's id is now kept on its
-- context, so a retry without contextId finds the stored reply; the unique
-- index makes two that race store one conversation (the other is answered
-- with its reply).
--
-- Kept for delegated turns, which act for a person (pact-protocol-faces
-- a2a/send.rs, keeps_first_message).
alter table conversations add column first_message_id text;
create unique index conversations_first_message
    on conversations (brand_id, pa_issuer, pa_sub, first_message_id)
    where first_message_id is not null;
