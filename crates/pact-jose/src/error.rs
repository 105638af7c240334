//! Error types. Variants say *why* something was refused so the server can log
//! it, but never carry the token, its signature or any attacker-supplied text:
//! the server answers every PA-JWT failure with the same bare 401 (PACT §3), and
//! logs must not become a place where bearer tokens leak (RFC 8725 §3.10 spirit).

/// Why a PA-JWT was refused (PACT §3). Every variant maps to the same 401.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PaJwtError {
    /// Larger than `PaJwtRules::max_token_bytes`; checked before any decoding
    /// so an oversized header cannot make us allocate or parse.
    #[error("token exceeds the size cap")]
    TooLarge,
    /// Not a compact JWS with a JSON-object header and payload (RFC 7515 §7.1).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// `alg` is not exactly "ES256" or "RS256" (PACT §3, RFC 8725 §3.1).
    #[error("alg not allowed")]
    AlgNotAllowed,
    /// A `crit` header: we implement no extension, so RFC 7515 §4.1.11 says reject.
    #[error("crit header not supported")]
    CritHeader,
    /// The key's algorithm differs from the header `alg` (RFC 8725 §3.1:
    /// each key is used with exactly one algorithm).
    #[error("key algorithm does not match the token alg")]
    KeyAlgMismatch,
    /// The token names a `kid` different from the key it is verified with.
    #[error("token kid does not match the key kid")]
    KidMismatch,
    /// The signature does not verify over the signing input (RFC 7515 §5.2).
    #[error("signature does not verify")]
    BadSignature,
    /// A claim is missing or has the wrong type or value; the text names it.
    #[error("invalid claim: {0}")]
    Claim(&'static str),
    /// `aud` is a string but not the audience the Provider assigned (PACT §3).
    #[error("audience mismatch")]
    AudienceMismatch,
    /// `iat` is further in the future than the clock-skew allowance (PACT §3).
    #[error("issued in the future")]
    IssuedInFuture,
    /// `exp` is in the past beyond the clock-skew allowance (RFC 7519 §4.1.4).
    #[error("expired")]
    Expired,
    /// `nbf` is in the future beyond the clock-skew allowance (RFC 7519 §4.1.5).
    #[error("not yet valid")]
    NotYetValid,
    /// `exp - iat` exceeds the maximum lifetime (PACT §3: 300 s).
    #[error("lifetime too long")]
    LifetimeTooLong,
}

/// Why a JWKS could not be used, or a jwksUri was refused.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The URI may not be used as a jwksUri (scheme, userinfo, fragment…).
    #[error("invalid jwksUri: {0}")]
    InvalidUri(&'static str),
    /// The host is, or resolves to, an address we refuse to contact (SSRF guard).
    #[error("jwksUri host is a forbidden address")]
    ForbiddenAddress,
    /// The host name did not resolve to any address.
    #[error("jwksUri host did not resolve")]
    Unresolvable,
    /// The document is not a JSON object with a `keys` array (RFC 7517 §5).
    #[error("malformed JWKS: {0}")]
    Malformed(&'static str),
    /// One JWK is not usable for PA-JWT verification; the text says why.
    #[error("unusable JWK: {0}")]
    UnusableKey(&'static str),
    /// An issuer's OpenID discovery document is unusable; the text says why
    /// (never the document's own text, which the issuer chose).
    #[error("discovery failed: {0}")]
    Discovery(&'static str),
    /// No key in the set matches the token's `kid` and `alg`.
    #[error("no matching key")]
    UnknownKey,
    /// The JWKS endpoint answered with a status other than 200.
    #[error("JWKS endpoint answered HTTP {0}")]
    Status(u16),
    /// The body exceeded `JwksPolicy::max_bytes`.
    #[error("JWKS body exceeds the size cap")]
    TooLarge,
    /// The fetch did not finish within `JwksPolicy::fetch_timeout`.
    #[error("JWKS fetch timed out")]
    Timeout,
    /// A network or HTTP error while fetching. The text includes reqwest's
    /// summary (with the URI, never a token) so a one-line log says what failed.
    #[error("JWKS fetch failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// A recent fetch failed and no keys are cached: we back off rather than
    /// hammer the endpoint on every request.
    #[error("JWKS unavailable (backing off after a failed fetch)")]
    Unavailable,
    /// The cache policy is inconsistent (e.g. min_ttl > max_ttl).
    #[error("invalid JWKS policy: {0}")]
    InvalidPolicy(&'static str),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
}
