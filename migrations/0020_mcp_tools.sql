-- A brand's tools may live on the merchant's own MCP server (docs/mcp.md,
-- "Connect your MCP server"): `pactd brand tool import-mcp` registers each
-- tool the server lists; pactd then calls the server's `tools/call` for it.
--
-- * kind: 'url' (pactd POSTs the signed `pact.tool_call` to `url`) or 'mcp'
--   (`url` is the MCP server's Streamable HTTP endpoint, `remote_name` the
--   tool's name there, which need not follow pactd's tool-name rule);
-- * mapped: false for an imported tool nobody has given a scope yet. It is
--   refused for everyone and not listed to agents until an admin maps it
--   (`pactd brand tool set-scope`): deny by default. `scope` null with
--   mapped true stays what it was, a public tool.
--
-- The existing `brand_tools_changed` trigger (0010) announces changes to
-- these columns too, so every node drops its cached copy.
alter table brand_tools
    add column kind text not null default 'url' check (kind in ('url', 'mcp')),
    add column remote_name text check (remote_name is null or length(remote_name) between 1 and 128),
    add column mapped boolean not null default true,
    add constraint brand_tools_mcp_remote check ((kind = 'mcp') = (remote_name is not null)),
    add constraint brand_tools_unmapped_no_scope check (mapped or scope is null);
