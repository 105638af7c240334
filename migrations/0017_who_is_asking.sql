-- Who is asking (issue 9, item 8): what the consent page shows about the
-- personal-agent platform, the way OAuth clients describe themselves with
-- RFC 7591 §2 client metadata (client_uri, logo_uri, policy_uri, tos_uri),
-- and the brand's own logo (its accent colour lives in brands.settings).

-- Logos are stored by content hash: pactd serves them from its own origin
-- (`GET /logos/{sha256}`), never by hot-linking the platform, and a hash URL
-- can be cached for ever. Only sniffed raster types are kept (no SVG).
create table logos (
    sha256       text primary key check (sha256 ~ '^[0-9a-f]{64}$'),
    content_type text not null
        check (content_type in ('image/png', 'image/jpeg', 'image/gif', 'image/webp')),
    bytes        bytea not null check (octet_length(bytes) between 1 and 262144),
    created_at   timestamptz not null default now()
);

alter table agents
    add column logo_uri        text,
    add column homepage_uri    text,
    add column policy_uri      text,
    add column tos_uri         text,
    -- The last logo fetched from logo_uri and accepted; kept when a later
    -- refresh fails, dropped when logo_uri changes.
    add column logo_sha256     text references logos (sha256),
    -- When a fetch was last attempted (the refresh TTL counts from here, so a
    -- failing logo_uri is not retried on every consent page).
    add column logo_fetched_at timestamptz;
