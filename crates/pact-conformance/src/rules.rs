//! The catalogue: every check, defined once, with its level and its source.
//!
//! A check's id is a [`RuleId`]; its name (`§3.alg-none-refused`), what it
//! asserts, how much a failure weighs ([`Level`]) and where the rule comes
//! from (a PACT section or an RFC clause, quoted briefly) all live in the
//! one table below, so the runner, the reports and the generated
//! docs/conformance-checks.md cannot disagree.

use std::fmt::Write as _;

use serde::Serialize;

/// How much a broken rule weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A PACT or RFC requirement: broken is FAIL (and a failed run).
    Must,
    /// A recommendation (SHOULD, "put it first"): broken is WARN.
    Should,
    /// A pactd convention PACT leaves open: broken is INFO, shown with
    /// `--pactd` or `--verbose`.
    Pactd,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Must => "MUST",
            Self::Should => "SHOULD",
            Self::Pactd => "pactd",
        }
    }

    /// What this level makes of a broken rule.
    pub fn broken(self) -> crate::Outcome {
        match self {
            Self::Must => crate::Outcome::Fail,
            Self::Should => crate::Outcome::Warn,
            Self::Pactd => crate::Outcome::Info,
        }
    }
}

/// One rule of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub id: RuleId,
    /// `§3.alg-none-refused`: the section of the rule, then what it is.
    pub name: &'static str,
    pub level: Level,
    /// `PACT §3`, `RFC 8628 §3.5`, …
    pub source: &'static str,
    /// The source's words, briefly.
    pub quote: &'static str,
    /// What the check does and expects.
    pub text: &'static str,
}

impl Rule {
    /// `§3` of `§3.alg-none-refused`, `§5.3` of `§5.3.slow-down`.
    pub fn section(&self) -> &'static str {
        section_of(self.name)
    }
}

/// `§3` of `§3.alg-none-refused`.
pub fn section_of(name: &str) -> &str {
    name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name)
}

macro_rules! catalogue {
    ($( $id:ident => $name:literal, $level:ident, $source:literal, $quote:literal, $text:literal; )*) => {
        /// Every check of the suite.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum RuleId { $($id,)* }

        impl RuleId {
            /// Every check, in report order.
            pub const ALL: &'static [RuleId] = &[$(RuleId::$id,)*];

            pub const fn rule(self) -> Rule {
                match self {
                    $(RuleId::$id => Rule {
                        id: self,
                        name: $name,
                        level: Level::$level,
                        source: $source,
                        quote: $quote,
                        text: $text,
                    },)*
                }
            }
        }
    };
}

impl RuleId {
    pub const fn name(self) -> &'static str {
        self.rule().name
    }

    pub const fn level(self) -> Level {
        self.rule().level
    }

    /// The rule of that name.
    pub fn named(name: &str) -> Option<RuleId> {
        Self::ALL.iter().copied().find(|r| r.name() == name)
    }
}

impl Serialize for RuleId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

catalogue! {
    PactdUrls => "§1.pactd-urls", Pactd, "PACT §1 (pactd rows)",
        "pactd: OAuth issuer {iface}/oauth … verification page {public_url}/device",
        "interface, OAuth and verification URLs follow pactd's layout";
    CardServed => "§2.card-served", Must, "PACT §2",
        "The card needs no authentication.",
        "the card is served without credentials, as a JSON object with an HTTP+JSON interface";
    UnknownBrand404 => "§2.unknown-brand-404", Must, "PACT §2",
        "An unknown brand gets 404 with an empty body; this is not an A2A error.",
        "an unknown brand's card is a 404 with an empty body";
    Interface => "§2.interface", Must, "PACT §2",
        "supportedInterfaces contains {url: iface, protocolBinding: \"HTTP+JSON\", protocolVersion: \"1.0\"}",
        "supportedInterfaces holds an HTTP+JSON 1.0 entry with an http(s) url";
    InterfaceFirst => "§2.interface-first", Should, "PACT §2",
        "… placed first.",
        "the HTTP+JSON 1.0 entry is the first of supportedInterfaces";
    PaJwtScheme => "§2.pa-jwt-scheme", Must, "PACT §2",
        "securitySchemes.paJwt is {httpAuthSecurityScheme: {scheme: \"Bearer\", bearerFormat: \"JWT\"}} [paJwt is only the example's name]",
        "a security scheme, under any name, is an HTTP Bearer (any case) JWT scheme";
    IdentityRequirement => "§2.identity-requirement", Must, "PACT §2",
        "securityRequirements has an entry that names it alone",
        "one securityRequirements entry names the PA-JWT scheme alone";
    DelegationScheme => "§2.delegation-scheme", Must, "PACT §2",
        "oauth2SecurityScheme: {flows: {deviceCode: …}, oauth2MetadataUrl} and a second requirement naming both",
        "an OAuth2 device-code scheme, under any name, with its own requirement beside the PA-JWT one";
    Fields => "§2.fields", Must, "PACT §2",
        "The card also carries name, description, version, provider, capabilities, modes, skills",
        "name, description, version, provider, capabilities all false, text/plain modes, skills";
    PactdCacheCors => "§2.pactd-cache-cors", Pactd, "PACT §2 (pactd)",
        "pactd: the card is sent with Cache-Control: public, max-age=300 and Access-Control-Allow-Origin: *",
        "Cache-Control: public, max-age=300 and Access-Control-Allow-Origin: *";
    ValidTokenAccepted => "§3.valid-token-accepted", Must, "PACT §3",
        "Every request except the Agent Card carries Authorization: Bearer <pa-jwt>",
        "a valid PA-JWT is accepted (the baseline for every refusal)";
    MissingTokenRefused => "§3.missing-token-refused", Must, "PACT §3",
        "Any failure … is 401 with WWW-Authenticate: Bearer realm=\"a2a\" … and no body.",
        "no Authorization, or not Bearer: bare 401";
    MalformedRefused => "§3.malformed-refused", Must, "PACT §3",
        "Any failure, whatever its cause (… a malformed one …), is 401 … and no body.",
        "tokens that are not compact JWS: bare 401";
    AlgNoneRefused => "§3.alg-none-refused", Must, "PACT §3; RFC 8725 §3.1",
        "alg: ES256 or RS256; any other value is refused",
        "alg none/None/NONE: bare 401";
    Hs256KeyConfusionRefused => "§3.hs256-key-confusion-refused", Must, "PACT §3; RFC 8725 §2.1",
        "alg: ES256 or RS256; any other value is refused",
        "HS256 keyed with the PA's public key: bare 401";
    Rs256AgainstEcKeyRefused => "§3.rs256-against-ec-key-refused", Must, "PACT §3; RFC 8725 §3.1",
        "Any failure, whatever its cause (… a bad signature …), is 401",
        "RS256 under the kid of the PA's EC key: bare 401";
    UnknownKidRefused => "§3.unknown-kid-refused", Must, "PACT §3",
        "kid should name a key in the PA's JWKS; … a bad signature … is 401",
        "an unknown kid signed by a foreign key: bare 401";
    ForeignKeyRefused => "§3.foreign-key-refused", Must, "PACT §3",
        "Any failure, whatever its cause (… a bad signature …), is 401",
        "a foreign key under the PA's kid: bare 401";
    TamperedSignatureRefused => "§3.tampered-signature-refused", Must, "PACT §3",
        "Any failure, whatever its cause (… a bad signature …), is 401",
        "one flipped signature bit, or half a signature: bare 401";
    TamperedPayloadRefused => "§3.tampered-payload-refused", Must, "PACT §3",
        "Any failure, whatever its cause (… a bad signature …), is 401",
        "claims edited after signing: bare 401";
    JkuIgnored => "§3.jku-ignored", Must, "PACT §3",
        "its jwksUri, an HTTPS URL that stays stable while the keys behind it rotate [keys come only from there]",
        "jku/x5u/jwk headers naming an attacker's key: bare 401";
    JkuNotFetched => "§3.jku-not-fetched", Should, "RFC 8725 §3.10",
        "blindly following a jku or x5u header … could result in SSRF attacks. Applications SHOULD protect against such attacks",
        "the URL a jku/x5u header names is never fetched";
    OversizedRefused => "§3.oversized-refused", Must, "PACT §3",
        "Any failure, whatever its cause … is 401 [PACT sets no size limit: any 4xx refusal counts, an HTTP layer's 431 (RFC 6585 §5) included]",
        "a 16 KiB PA-JWT is refused with a 4xx, not served";
    PactdOversized401 => "§3.pactd-oversized-401", Pactd, "PACT §3 (pactd)",
        "pactd: a token … longer than 8192 bytes is refused [with the bare 401 of every PA-JWT failure]",
        "a 16 KiB PA-JWT gets the bare 401 from the application, not an HTTP-layer refusal";
    IssUnknownRefused => "§3.iss-unknown-refused", Must, "PACT §3",
        "iss: a registered issuer whose PA is enabled (compared as an exact string)",
        "an unregistered issuer (also a near miss): bare 401";
    SubMissingRefused => "§3.sub-missing-refused", Must, "PACT §3",
        "sub: required; a stable, opaque id of the User at that PA",
        "sub missing, empty or not a string: bare 401 (an empty string identifies nobody)";
    AudMissingRefused => "§3.aud-missing-refused", Must, "PACT §3",
        "aud: exactly the audience assigned by the Provider, as a single string",
        "aud missing or null: bare 401";
    AudWrongRefused => "§3.aud-wrong-refused", Must, "PACT §3",
        "aud: exactly the audience assigned by the Provider",
        "another audience: bare 401";
    AudArrayRefused => "§3.aud-array-refused", Must, "PACT §3",
        "aud: … as a single string (not an array)",
        "aud as an array (even holding the audience): bare 401";
    AudInterfaceUrlRefused => "§3.aud-interface-url-refused", Must, "PACT §3",
        "one opaque audience string for the whole Provider: never one per brand",
        "aud = the interface URL: bare 401";
    IatMissingRefused => "§3.iat-missing-refused", Must, "PACT §3",
        "iat: required",
        "no iat: bare 401";
    IatFutureRefused => "§3.iat-future-refused", Must, "PACT §3",
        "iat: refused when more than 30 s in the future",
        "iat 31 s in the future: bare 401";
    IatSkewTolerated => "§3.iat-skew-tolerated", Must, "PACT §3",
        "iat: refused when more than 30 s in the future",
        "iat 25 s in the future is within the 30 s: accepted";
    ExpMissingRefused => "§3.exp-missing-refused", Must, "PACT §3",
        "exp: required",
        "no exp: bare 401";
    ExpPastRefused => "§3.exp-past-refused", Must, "PACT §3",
        "exp: checked with 30 s of clock-skew tolerance",
        "exp 31 s in the past: bare 401";
    LifetimeOver300Refused => "§3.lifetime-over-300-refused", Must, "PACT §3",
        "exp: no more than 300 s after iat",
        "exp − iat = 301 s: bare 401";
    JtiOptional => "§3.jti-optional", Must, "PACT §3",
        "jti: optional",
        "a PA-JWT without jti is accepted";
    TokenReuseAccepted => "§3.token-reuse-accepted", Pactd, "PACT §3 (pactd)",
        "jti: optional; no replay tracking is required [so a Provider may still track it]",
        "the same PA-JWT works twice on one brand";
    TokenOnSeveralBrands => "§3.token-on-several-brands", Must, "PACT §3",
        "one token may be used on several brands",
        "the same PA-JWT (without jti) works on two brands";
    AuthBeforeBrand => "§3.auth-before-brand", Must, "PACT §3",
        "Authentication comes first: before the brand is looked up",
        "a bad PA-JWT at an unknown brand: 401, not 404";
    AuthBeforeBody => "§3.auth-before-body", Must, "PACT §3",
        "Authentication comes first: … before the body is read",
        "a bad PA-JWT with a bad body: 401, not 400";
    EveryOperationAuthenticated => "§3.every-operation-authenticated", Must, "PACT §4",
        "Every operation requires the PA-JWT of section 3.",
        "every A2A operation without a PA-JWT: bare 401";
    HttpIssuerRefused => "§3.1.http-issuer-refused", Must, "PACT §3, §3.1",
        "its jwksUri, an HTTPS URL … An open Provider still verifies §3.2 in full [an iss that is not https is refused, whatever the policy]",
        "an agent nobody registered whose iss is http (its discovery document and JWKS served): bare 401";
    OpenAdmission => "§3.1.open-admission", Must, "PACT §3.1",
        "Whether a Provider accepts only personal agents it has allowlisted or any personal agent whose iss serves a JWKS is the Provider's policy",
        "an agent nobody registered, its keys at {iss}/.well-known/openid-configuration: admitted where the brand's pact_admission is open, bare 401 where allowlist";
    ReplyShape => "§4.reply-shape", Must, "PACT §4",
        "POST message:send → 200 {\"message\": Message}; each part is exactly {\"text\": …}",
        "message:send → 200 {message: {messageId, contextId, ROLE_AGENT, [{text}]}}";
    ContentTypeExact => "§4.content-type-exact", Must, "PACT §4",
        "Every A2A response … has Content-Type: application/a2a+json, exactly, without a charset",
        "every A2A response is exactly application/a2a+json";
    AnyRequestContentType => "§4.any-request-content-type", Must, "PACT §4",
        "Any request Content-Type is accepted",
        "any request Content-Type (or none) is accepted";
    A2aVersionOptional => "§4.a2a-version-optional", Must, "PACT §4",
        "the A2A-Version header may be present with any value or absent",
        "any or no A2A-Version header is accepted";
    ContextContinues => "§4.context-continues", Must, "PACT §4",
        "the Provider mints an opaque contextId and returns it in the reply",
        "a returned contextId continues the conversation";
    UnknownContext => "§4.unknown-context", Must, "PACT §4",
        "An unknown id … INVALID_PARAMS with message Unknown contextId",
        "an unknown contextId: INVALID_PARAMS \"Unknown contextId\"";
    ForeignContext => "§4.foreign-context", Must, "PACT §4",
        "An unknown id and an id that belongs to someone else get the same answer",
        "another sub's contextId: exactly the unknown-context error";
    ReplayedMessageId => "§4.replayed-message-id", Must, "PACT §4",
        "a messageId already seen in the context returns the stored reply … without running the agent again",
        "a repeated messageId returns the stored reply";
    RoleUserRequired => "§4.role-user-required", Must, "PACT §4",
        "role other than ROLE_USER → INVALID_PARAMS",
        "role other than ROLE_USER: INVALID_PARAMS";
    BlankTextRefused => "§4.blank-text-refused", Must, "PACT §4",
        "no text part with non-blank text → INVALID_PARAMS",
        "no non-blank text part: INVALID_PARAMS";
    NonTextPartRefused => "§4.non-text-part-refused", Must, "PACT §4",
        "a non-text part (raw, url, data) → CONTENT_TYPE_NOT_SUPPORTED",
        "raw/url/data parts: CONTENT_TYPE_NOT_SUPPORTED";
    TaskIdRefused => "§4.task-id-refused", Must, "PACT §4",
        "a taskId → TASK_NOT_FOUND, message Task not found",
        "a taskId: TASK_NOT_FOUND \"Task not found\"";
    BadJsonRefused => "§4.bad-json-refused", Must, "PACT §4",
        "a body that is not valid JSON → INVALID_PARAMS",
        "a body that is not JSON: INVALID_PARAMS";
    TasksList => "§4.tasks-list", Must, "PACT §4",
        "GET tasks → 200 {\"tasks\": [], \"nextPageToken\": \"\", \"pageSize\": N, \"totalSize\": 0}",
        "GET tasks: 200 {tasks: [], nextPageToken: \"\", pageSize: 50, totalSize: 0}";
    TasksPageSize => "§4.tasks-page-size", Must, "PACT §4",
        "pageSize is 1–100, default 50; … other query parameters are ignored",
        "pageSize 1–100 is echoed; other query parameters are ignored";
    TasksPageSizeInvalid => "§4.tasks-page-size-invalid", Must, "PACT §4",
        "pageSize … any other value is INVALID_PARAMS",
        "pageSize 0, 101, -1, abc: INVALID_PARAMS";
    TaskGetNotFound => "§4.task-get-not-found", Must, "PACT §4",
        "GET tasks/{id} → TASK_NOT_FOUND with message Task not found: {id}",
        "GET tasks/{id}: TASK_NOT_FOUND \"Task not found: {id}\"";
    TaskCancelNotFound => "§4.task-cancel-not-found", Must, "PACT §4",
        "POST tasks/{id}:cancel → TASK_NOT_FOUND with message Task not found: {id}",
        "POST tasks/{id}:cancel: TASK_NOT_FOUND \"Task not found: {id}\"";
    StreamUnsupported => "§4.stream-unsupported", Must, "PACT §4",
        "POST message:stream → UNSUPPORTED_OPERATION",
        "POST message:stream: UNSUPPORTED_OPERATION";
    SubscribeUnsupported => "§4.subscribe-unsupported", Must, "PACT §4",
        "POST tasks/{id}:subscribe → UNSUPPORTED_OPERATION",
        "POST tasks/{id}:subscribe: UNSUPPORTED_OPERATION";
    ExtendedCardUnsupported => "§4.extended-card-unsupported", Must, "PACT §4",
        "GET extendedAgentCard → UNSUPPORTED_OPERATION",
        "GET extendedAgentCard: UNSUPPORTED_OPERATION";
    PushConfigsUnsupported => "§4.push-configs-unsupported", Must, "PACT §4",
        "tasks/{id}/pushNotificationConfigs… → PUSH_NOTIFICATION_NOT_SUPPORTED",
        "pushNotificationConfigs routes: PUSH_NOTIFICATION_NOT_SUPPORTED";
    UnmatchedRoute404 => "§4.unmatched-route-404", Must, "PACT §4",
        "anything else → 404 or 405, with no A2A body; routing is decided before authentication",
        "unknown paths: 404 (or 405), no A2A body, before authentication";
    WrongMethod405 => "§4.wrong-method-405", Must, "PACT §4",
        "anything else → 404 (unknown path) or 405 (known path, wrong method), with no A2A body",
        "wrong methods: 405 (or 404), no A2A body, before authentication";
    ClosedContext => "§4.closed-context", Must, "PACT §4",
        "A closed conversation answers UNSUPPORTED_OPERATION.",
        "a closed conversation: UNSUPPORTED_OPERATION";
    Metadata => "§5.metadata", Must, "PACT §2, §5; RFC 8414 §2",
        "oauth2MetadataUrl … issuer, device_authorization_endpoint, token_endpoint, jwks_uri",
        "RFC 8414 metadata at oauth2MetadataUrl matches the card";
    DeviceAuthorization => "§5.1.device-authorization", Must, "PACT §5.1; RFC 8628 §3.2",
        "{device_code, user_code, verification_uri, verification_uri_complete, expires_in, interval}, sent with Cache-Control: no-store",
        "device authorization: RFC 8628 §3.2 fields, Cache-Control: no-store";
    PactdCodes => "§5.1.pactd-codes", Pactd, "PACT §5.1 (pactd)",
        "pactd: user_code is 8 letters drawn from BCDFGHJKLMNPQRSTVWXZ, shown as XXXX-XXXX",
        "user_code XXXX-XXXX of BCDFGHJKLMNPQRSTVWXZ; complete link = verification_uri?user_code=";
    RequiresPaJwt => "§5.1.requires-pa-jwt", Must, "PACT §5",
        "it authenticates on every OAuth call by sending its PA-JWT … (a failure is the same bare 401)",
        "device authorization without a PA-JWT: bare 401";
    UnknownScope => "§5.1.unknown-scope", Must, "PACT §5.1",
        "a scope the brand does not define → 400 invalid_scope",
        "an unknown scope: 400 invalid_scope";
    ClientIdMismatch => "§5.1.client-id-mismatch", Must, "PACT §5.1",
        "client_id differs from the PA-JWT's iss → 401 invalid_client",
        "client_id ≠ PA iss: 401 invalid_client";
    AuthorizationPending => "§5.3.authorization-pending", Must, "PACT §5.3; RFC 8628 §3.5",
        "not yet decided → authorization_pending",
        "before approval: authorization_pending";
    SlowDown => "§5.3.slow-down", Must, "PACT §5.3; RFC 8628 §3.5",
        "polled faster than interval → slow_down",
        "polling again at once: slow_down";
    SlowDownHonoured => "§5.3.slow-down-honoured", Must, "PACT §5.3; RFC 8628 §3.5",
        "polled faster than interval → slow_down, and the interval grows by 5 s [a poll at the grown interval is not too fast]",
        "a client that adds 5 s after slow_down is not told slow_down again";
    SlowDownAdds5s => "§5.3.slow-down-adds-5s", Pactd, "RFC 8628 §3.5 (pactd)",
        "the interval MUST be increased by 5 seconds for this and all subsequent requests [the client's duty; pactd also enforces it]",
        "after slow_down, polling at the old interval (+1 s) is still slow_down";
    AccessDenied => "§5.3.access-denied", Must, "PACT §5.3; RFC 8628 §3.5",
        "denied by the User → access_denied",
        "a denied request: access_denied";
    ExpiredToken => "§5.3.expired-token", Must, "PACT §5.3; RFC 8628 §3.5",
        "expired → expired_token",
        "an expired code: expired_token";
    UnknownCode => "§5.3.unknown-code", Must, "PACT §5.3",
        "unknown, issued to another PA or brand, or already redeemed → invalid_grant",
        "an unknown device_code: invalid_grant";
    ForeignCode => "§5.3.foreign-code", Must, "PACT §5.3",
        "unknown, issued to another PA or brand, or already redeemed → invalid_grant",
        "another brand's device_code: invalid_grant";
    UnsupportedGrantType => "§5.3.unsupported-grant-type", Must, "PACT §5.3; RFC 6749 §5.2",
        "(any) with an unknown grant_type → unsupported_grant_type",
        "an unknown grant_type: unsupported_grant_type";
    TokenResponse => "§5.3.token-response", Must, "PACT §5.3; RFC 6749 §5.1",
        "{\"token_type\": \"Bearer\", \"access_token\", \"refresh_token\", \"expires_in\", \"scope\"}",
        "success: {token_type Bearer, access_token, refresh_token, expires_in, scope}, no-store";
    ScopeMayBeLess => "§5.3.scope-may-be-less", Must, "PACT §5.3; RFC 6749 §3.3",
        "scope may be narrower than what was asked for",
        "scope is what was approved, within what was requested";
    RedeemTwice => "§5.3.redeem-twice", Must, "PACT §5.3",
        "Success, exactly once per device code",
        "a redeemed device_code: invalid_grant";
    Refresh => "§5.3.refresh", Must, "PACT §5.3; RFC 6749 §6",
        "Refresh: grant_type=refresh_token … with the PA-JWT; [RFC 6749 §6:] The requested scope MUST NOT include any scope not originally granted",
        "refresh returns a working access token, never a wider scope";
    PactdRefreshRotates => "§5.3.pactd-refresh-rotates", Pactd, "PACT §5.3 (pactd)",
        "pactd: single-use: each use returns a new access and refresh token pair",
        "refresh returns a new refresh token too";
    RefreshReuseRevokes => "§5.3.refresh-reuse-revokes", Pactd, "PACT §5.3 (pactd); RFC 9700 §4.14.2",
        "pactd: presenting a refresh token that was already used revokes the whole grant",
        "a used refresh token: invalid_grant, and the grant is revoked";
    ErrorShape => "§5.3.error-shape", Must, "PACT §5.3; RFC 6749 §5.2",
        "Errors are RFC 6749 §5.2 JSON, {error, error_description?}, with status 400, except invalid_client, 401",
        "OAuth errors: JSON {error, error_description?}, 400 (401 invalid_client)";
    Jwks => "§5.4.jwks", Must, "PACT §5.4",
        "its keys are published at the metadata's jwks_uri",
        "the metadata jwks_uri serves ES256 keys";
    DelegationToken => "§5.4.delegation-token", Must, "PACT §5.4",
        "a JWT signed by the Provider with ES256 … iss, aud, sub, client_id, scope, grant_id, iat, exp (≤ 1 h), jti",
        "the token verifies; iss, aud = iface, sub, client_id, scope, grant_id, iat, exp ≤ 1 h, jti";
    PactdHeader => "§5.4.pactd-header", Pactd, "PACT §5.4 (pactd); RFC 9068 §2.1",
        "pactd: header typ: at+jwt and kid",
        "token header typ at+jwt with a kid";
    StepUpTask => "§5.5.step-up-task", Must, "PACT §5.5",
        "the Provider does not fail. It answers 200 with a task … TASK_STATE_AUTH_REQUIRED",
        "a turn needing a scope without one: 200 task TASK_STATE_AUTH_REQUIRED";
    StepUpContextOpen => "§5.5.step-up-context-open", Must, "PACT §5.5",
        "… and the conversation stays open",
        "after a step-up the conversation stays open";
    StepUpResend => "§5.5.step-up-resend", Must, "PACT §5.5",
        "The PA runs section 5.1 again … then re-sends in the same context.",
        "re-sent with a token in the same context: a message";
    PaJwtCheckedFirst => "§5.5.pa-jwt-checked-first", Must, "PACT §5.5",
        "The Provider checks, in order: 1. the PA-JWT, as in section 3",
        "a delegation token without a PA-JWT: bare 401";
    TamperedTokenRefused => "§5.5.tampered-token-refused", Must, "PACT §5.5; RFC 6750 §3.1",
        "A bad delegation token is 401 with WWW-Authenticate: Bearer realm=\"a2a\", error=\"invalid_token\" and no body",
        "a forged delegation token: 401 error=\"invalid_token\", no body";
    TokenOtherBrandRefused => "§5.5.token-other-brand-refused", Must, "PACT §5.4, §5.5",
        "aud: the interface URL: one token is good for one brand",
        "a token of another brand: 401 error=\"invalid_token\"";
    ContextOtherUser => "§5.5.context-other-user", Must, "PACT §5.5",
        "A context that has already run as one sub refuses another sub with INVALID_PARAMS.",
        "a context that ran as one user refuses another (also on retry)";
    RevokedGrantRefused => "§5.5.revoked-grant-refused", Must, "PACT §5.5; RFC 7009",
        "the delegation token: … and that its grant has not been revoked",
        "a revoked grant's token: 401 error=\"invalid_token\"";
    ReceiptPresent => "§5.6.receipt-present", Must, "PACT §5.6",
        "Every reply served under a delegation token carries message.metadata[\"pact.receipt\"] = {jws, claims}",
        "a delegated reply carries pact.receipt {jws, claims}";
    ReceiptVerifies => "§5.6.receipt-verifies", Must, "PACT §5.6",
        "jws is a compact JWS over the claims, signed with the delegation-token keys; its payload must equal claims",
        "the receipt verifies against jwks_uri and names the grant, user, PA, brand";
    ReceiptOnRetry => "§5.6.receipt-on-retry", Must, "PACT §4",
        "Retries: … returns the stored reply — the same reply messageId and the same receipt",
        "a retried messageId returns the same receipt";
    ReceiptChain => "§5.6.receipt-chain", Pactd, "PACT §5.6 (pactd)",
        "pactd adds a claim prev: the base64url SHA-256 of the previous receipt's JWS under the same grant",
        "prev is the hash of the grant's previous receipt";
    DetailsUnknownType => "§5.7.unknown-type-refused", Must, "PACT §5.7; RFC 9396 §5",
        "an unknown type … → 400 invalid_authorization_details",
        "an unknown authorization_details type: invalid_authorization_details";
    DetailsMalformed => "§5.7.malformed-refused", Must, "PACT §5.7; RFC 9396 §5",
        "Malformed details … an unknown field → 400 invalid_authorization_details",
        "malformed authorization_details: invalid_authorization_details";
    ErrorEnvelope => "§6.error-envelope", Must, "PACT §6",
        "A2A errors use the AIP-193 envelope {error: {code, status, message, details: [ErrorInfo]}}",
        "every A2A error is the AIP-193 envelope";
    ReasonStatusTable => "§6.reason-status-table", Must, "PACT §6",
        "reason → HTTP and status, as the table says",
        "every A2A error's HTTP code and status match its reason";
    RateLimit429 => "§6.rate-limit-429", Must, "PACT §6",
        "429 with Retry-After when a PA or a (PA, sub) is rate-limited",
        "a 429 carries Retry-After";
}

/// The catalogue as Markdown: docs/conformance-checks.md is this, verbatim
/// (a test keeps them equal).
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Conformance checks\n\n\
         <!-- Generated by `pact-agent conformance --list-checks --markdown`; do not edit. -->\n\n\
         Every check of `pact-agent conformance`, in report order, with its level and its source.\n\n\
         - **MUST**: a PACT or RFC requirement. Broken: `FAIL`, and the run exits 1.\n\
         - **SHOULD**: a recommendation. Broken: `WARN`; the exit status ignores it.\n\
         - **pactd**: a convention of pactd that PACT leaves open. Broken: `INFO`, shown with `--pactd` \
         or `--verbose`; the exit status ignores it.\n\n\
         A check that cannot be exercised is `SKIP`, with the reason. In the sources, words in \
         [brackets] are the runner's reading, not the source's.\n",
    );
    let mut section = "";
    for id in RuleId::ALL {
        let r = id.rule();
        let s = r.section();
        if s != section {
            section = s;
            let _ = write!(
                out,
                "\n## {s}\n\n| Check | Level | Source | Asserts |\n|---|---|---|---|\n"
            );
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {}: “{}” | {} |",
            r.name,
            r.level.as_str(),
            md_cell(r.source),
            md_cell(r.quote),
            md_cell(r.text)
        );
    }
    out
}

/// Text safe in a Markdown table cell.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_sectioned() {
        let mut seen = BTreeSet::new();
        for id in RuleId::ALL {
            let r = id.rule();
            assert!(seen.insert(r.name), "{} twice", r.name);
            assert!(r.name.starts_with('§'), "{}", r.name);
            assert_eq!(RuleId::named(r.name), Some(*id));
            assert!(!r.quote.is_empty() && !r.source.is_empty() && !r.text.is_empty());
        }
    }

    /// docs/conformance-checks.md is generated: regenerate it with
    /// `cargo run -p pact-agent -- conformance --list-checks --markdown > docs/conformance-checks.md`.
    #[test]
    fn the_committed_docs_list_every_check_as_the_runner_does() {
        let committed = include_str!("../../../docs/conformance-checks.md");
        assert!(
            committed == markdown(),
            "docs/conformance-checks.md is stale: run `cargo run -p pact-agent -- conformance \
             --list-checks --markdown > docs/conformance-checks.md`"
        );
    }

    #[test]
    fn pactd_conventions_say_so_in_their_source() {
        for id in RuleId::ALL {
            let r = id.rule();
            assert_eq!(
                r.level == Level::Pactd,
                r.source.contains("pactd"),
                "{}: {:?} from {}",
                r.name,
                r.level,
                r.source
            );
        }
    }
}
