-- How pactd authenticates at the brand's OpenID provider's token endpoint:
-- `client_secret_basic` (RFC 6749 §2.3.1, the secret sealed with the master
-- key) or `private_key_jwt` (OpenID Connect Core 1.0 §9, RFC 7523 §2.2): a
-- short-lived JWT signed with pactd's own signing key, whose public half the
-- provider fetches from the brand's published JWKS. The latter needs no
-- secret, so the sealed secret becomes optional, and is required exactly
-- when the method uses it.
alter table brand_oidc
    add column client_auth text not null default 'client_secret_basic'
        check (client_auth in ('client_secret_basic', 'private_key_jwt')),
    -- the assertion's `aud` for private_key_jwt: the token endpoint URL
    -- (Core §9's "SHOULD"; Entra ID requires it) or the issuer identifier
    -- (Auth0 requires it; RFC 7523 §3 allows any value that identifies the
    -- authorization server)
    add column assertion_aud text not null default 'token_endpoint'
        check (assertion_aud in ('token_endpoint', 'issuer')),
    alter column client_secret_sealed drop not null,
    add constraint brand_oidc_secret_iff_basic check (
        (client_auth = 'client_secret_basic') = (client_secret_sealed is not null)
    );
