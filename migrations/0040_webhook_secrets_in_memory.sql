-- Every node keeps a merchant brand's webhook signing secrets (sealed) in
-- memory with its agent settings (pact-server config_cache.rs), instead of
-- reading them for every turn and every tool call it signs: a new or
-- rotated secret is announced on `pactd_config` like the other rows a node
-- keeps, and each node drops its copy at once.
create trigger brand_webhook_secrets_changed
    after insert or update or delete or truncate on brand_webhook_secrets
    for each statement execute function pactd_notify_config();
