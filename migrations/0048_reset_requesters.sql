-- Who asked for each password-reset link: a hash of the requester's address
-- (its rate-limit key), never the address itself. The mail budget is counted
-- per account and requester, so whoever knows an address cannot spend the
-- account's whole budget and keep its owner from resetting; a larger budget
-- per account still bounds what all requesters together can send. Null for
-- links made before, and by the operator's tools.
alter table password_resets add column requested_from bytea;
