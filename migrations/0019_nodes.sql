-- Every pactd node says it is alive (issue 12, item 2): a revocation reaches
-- a node only through its LISTEN connection on pactd_revocations (PACT §5.7
-- asks that a revoked grant be refused at once), so staff must see when a
-- node is running without one. Each node writes its row about every 10 s;
-- a row not refreshed for a while is shown as gone and later swept.
create table nodes (
    id         uuid primary key,
    hostname   text not null check (length(hostname) between 1 and 255),
    version    text not null check (length(version) between 1 and 64),
    started_at timestamptz not null,
    last_seen  timestamptz not null,
    -- Whether the node's change listener (revocations, keys, configuration)
    -- was subscribed at last_seen.
    listening  boolean not null
);

create index nodes_last_seen on nodes (last_seen);
