-- The receipt log: every receipt is a leaf of one Merkle tree (RFC 9162 §2.1),
-- and signed tree heads over it are published, so a PA that kept an older
-- head can prove a later deletion or truncation (docs/receipt-log.md).
--
-- Log indexes are assigned by the tree-head job, not by the turn that stores
-- the receipt. A counter row bumped in every receipt's transaction would give
-- commit order directly, but it would make every delegated turn of every
-- grant on every node queue on one row lock until commit. Instead each new
-- receipt leaves its id in `receipt_log_pending` (a row of its own, written
-- by a trigger in the receipt's transaction, so it is visible exactly when
-- the receipt is), and the job, holding an advisory lock so that one node
-- at a time does it, moves what is pending into `receipt_log` with the next
-- indexes in receipt id order. Indexes are thus gap-free, append-only and
-- deterministic; a receipt that commits late simply gets a later index.
create table receipt_log (
    log_index   bigint primary key check (log_index >= 0),
    -- No foreign key: an entry whose receipt was deleted behind pactd's back
    -- stays, and is what `pactd receipts verify` reports.
    receipt_id  bigint not null unique,
    -- SHA-256(0x00 || the receipt's compact JWS): kept so the job and the
    -- proof endpoints never rehash the log. `pactd receipts verify` does not
    -- trust it: it recomputes each leaf from the receipt itself.
    leaf_hash   bytea not null check (octet_length(leaf_hash) = 32)
);
create index receipt_log_leaf_hash on receipt_log (leaf_hash);
create trigger receipt_log_append_only before update or delete on receipt_log
    for each row execute function pactd_append_only();

create table receipt_log_pending (
    receipt_id  bigint primary key references receipts (id) on delete cascade
);

create function pactd_receipt_pending() returns trigger language plpgsql as $$
begin
    insert into receipt_log_pending (receipt_id) values (new.id);
    return null;
end;
$$;
create trigger receipts_log_pending after insert on receipts
    for each row execute function pactd_receipt_pending();

-- Receipts stored before this migration join the log in id order.
insert into receipt_log_pending (receipt_id) select id from receipts;

-- Signed tree heads (RFC 9162 §4.10). One per size: the primary key makes a
-- second node's head of the same size fail instead of publishing a
-- conflicting one (the job also runs under an advisory lock).
create table receipt_tree_heads (
    tree_size   bigint primary key check (tree_size > 0),
    root_hash   bytea not null check (octet_length(root_hash) = 32),
    -- The signed timestamp, milliseconds since the Unix epoch (RFC 9162).
    timestamp_ms bigint not null,
    -- The compact JWS (typ pact-sth+jws) over {tree_size, root_hash, timestamp}.
    jws         text not null,
    kid         text not null,
    created_at  timestamptz not null default now()
);
create trigger receipt_tree_heads_append_only before update or delete on receipt_tree_heads
    for each row execute function pactd_append_only();
