//! The personal agent's commands: `send`, `connect`, `receipts`.
//!
//! `send` talks A2A (PACT §4) with a PA-JWT and, when the user connected,
//! the delegation token (§5.5), refreshing it transparently; it remembers
//! the conversation per brand and `sub`, follows a step-up task by offering
//! to connect for the missing scopes, and verifies and keeps every receipt
//! (§5.6). `connect` runs the device flow (§5.1, §5.3) as a careful client.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{Result, anyhow, bail};
use pact_proto::A2aError;
use pact_proto::oauth::{DeviceAuthorizationResponse, TokenResponse};
use serde_json::{Value, json};

use crate::card::{self, CardInfo};
use crate::http::{Http, Request, Response};
use crate::jwt::{Signer, decode_unverified, unix_now};
use crate::oauth::{self, AuthServer, PollEvent, PollOutcome};
use crate::state::{Home, Identity, StoredReceipt, StoredTokens, key_of};

/// Refresh a delegation token when less than this is left (seconds).
pub const REFRESH_MARGIN_SECS: i64 = 60;
/// The header that carries the delegation token (PACT §5.5).
pub const DELEGATION_HEADER: &str = "X-A2A-User-Delegation";

/// How the commands talk to the person.
pub trait Ui: Send {
    fn info(&mut self, msg: &str);
    fn warn(&mut self, msg: &str);
    /// Shows the link and code of a device authorization (and a QR code).
    fn show_link(&mut self, device: &DeviceAuthorizationResponse);
    /// Asks a yes/no question; `false` when nobody can answer.
    fn confirm(&mut self, question: &str) -> bool;
}

/// The terminal: messages on stderr, replies on stdout.
#[derive(Debug, Default)]
pub struct TerminalUi {
    pub qr: bool,
}

impl Ui for TerminalUi {
    fn info(&mut self, msg: &str) {
        eprintln!("{msg}");
    }
    fn warn(&mut self, msg: &str) {
        eprintln!("warning: {msg}");
    }
    fn show_link(&mut self, device: &DeviceAuthorizationResponse) {
        eprintln!();
        eprintln!("To allow this, open:");
        eprintln!("    {}", device.verification_uri_complete);
        eprintln!(
            "or go to {} and enter the code {}",
            device.verification_uri, device.user_code
        );
        if self.qr
            && let Some(q) = crate::qr::render(&device.verification_uri_complete)
        {
            eprintln!("{q}");
        }
        let expires = if device.expires_in >= 120 {
            format!("{} min", device.expires_in / 60)
        } else {
            format!("{} s", device.expires_in)
        };
        eprintln!(
            "(the code expires in {expires}; checking every {} s)",
            device.interval
        );
    }
    fn confirm(&mut self, question: &str) -> bool {
        if !std::io::stdin().is_terminal() {
            return false;
        }
        eprint!("{question} [y/N] ");
        std::io::stderr().flush().ok();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return false;
        }
        matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
    }
}

/// The agent: its state directory, identity, signer and HTTP client.
#[derive(Clone, Debug)]
pub struct Agent {
    pub home: Home,
    pub identity: Identity,
    pub signer: Signer,
    pub http: Http,
}

impl Agent {
    /// Loads the identity; `audience` overrides the stored one (and is
    /// stored when none was).
    pub fn load(home: Home, audience: Option<&str>) -> Result<Self> {
        let mut identity = home.identity()?;
        if identity.settings.audience.is_none()
            && let Some(a) = audience
        {
            identity.settings.audience = Some(a.to_owned());
            home.save_settings(&identity.settings)?;
        }
        let signer = identity.signer(audience)?;
        Ok(Self {
            home,
            identity,
            signer,
            http: Http::new()?,
        })
    }

    /// `sub`, or the identity's default.
    pub fn sub(&self, sub: Option<&str>) -> String {
        sub.map(str::to_owned)
            .unwrap_or_else(|| self.identity.settings.default_sub.clone())
    }

    /// What to tell the person when the Provider answers a valid PA-JWT
    /// with 401 (PACT §3: registration is the operator's job).
    pub fn registration_hint(&self) -> String {
        let uri = self
            .identity
            .settings
            .jwks_uri
            .clone()
            .unwrap_or_else(|| "<the URL that serves your JWKS>".to_owned());
        format!(
            "the Provider refused the PA-JWT (401). Is this agent registered, enabled, its JWKS \
             reachable and the audience {:?} right? The operator registers it with:\n    {}",
            self.signer.audience,
            self.identity.registration_line(&uri)
        )
    }
}

/// Options of `connect`.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    pub card_url: String,
    pub scopes: Vec<String>,
    pub sub: Option<String>,
    pub restart_on_expiry: bool,
    pub show_tokens: bool,
    pub authorization_details: Option<String>,
}

fn delegation_of(info: &CardInfo) -> Result<&card::DelegationInfo> {
    info.delegation.as_ref().ok_or_else(|| {
        anyhow!(
            "{} offers no delegation (its card has no userDelegation scheme)",
            info.name
        )
    })
}

/// The RFC 8414 metadata of a brand (PACT §5), via the card.
pub async fn auth_server(http: &Http, info: &CardInfo) -> Result<AuthServer> {
    let d = delegation_of(info)?;
    Ok(oauth::discover(http, &d.metadata_url).await?.1)
}

/// Runs the device flow (PACT §5.1, §5.3) and stores the tokens.
pub async fn connect(
    agent: &Agent,
    opts: &ConnectOptions,
    ui: &mut dyn Ui,
) -> Result<StoredTokens> {
    let (_, info) = card::fetch(&agent.http, &opts.card_url).await?;
    connect_at(agent, &info, opts, ui).await
}

/// [`connect`] with the card already fetched.
pub async fn connect_at(
    agent: &Agent,
    info: &CardInfo,
    opts: &ConnectOptions,
    ui: &mut dyn Ui,
) -> Result<StoredTokens> {
    let d = delegation_of(info)?;
    if opts.scopes.is_empty() {
        bail!(
            "pass --scope for each permission to ask for; {} offers: {}",
            info.name,
            d.scopes.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(unknown) = opts.scopes.iter().find(|s| !d.scopes.contains_key(*s)) {
        bail!(
            "{unknown:?} is not a scope of {}; it offers: {}",
            info.name,
            d.scopes.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let server = oauth::discover(&agent.http, &d.metadata_url)
        .await
        .ok()
        .map(|(_, s)| s);
    let sub = agent.sub(opts.sub.as_deref());
    ui.info(&format!("Asking {} for:", info.name));
    for s in &opts.scopes {
        ui.info(&format!(
            "  {s}: {}",
            d.scopes.get(s).map(String::as_str).unwrap_or("")
        ));
    }
    loop {
        let res = oauth::device_authorize(
            &agent.http,
            &agent.signer,
            &sub,
            &d.device_authorization_url,
            &opts.scopes,
            opts.authorization_details.as_deref(),
        )
        .await?;
        if res.status == 401 && oauth::oauth_error_code(&res).is_none() {
            bail!("{}", agent.registration_hint());
        }
        let device = oauth::parse_device_response(&res)?;
        ui.show_link(&device);
        let mut events = |e: PollEvent| match e {
            PollEvent::Pending => {}
            PollEvent::SlowDown { interval } => ui.info(&format!(
                "(the server asked us to slow down: checking every {interval} s)"
            )),
        };
        let outcome = oauth::poll_until_decided(
            &agent.http,
            &agent.signer,
            &sub,
            &d.token_url,
            &device,
            &mut events,
        )
        .await?;
        match outcome {
            PollOutcome::Granted { tokens, .. } => {
                let stored =
                    store_tokens(agent, info, &sub, &tokens, &d.token_url, server.as_ref())?;
                let granted: BTreeSet<String> = stored.scopes().into_iter().collect();
                ui.info(&format!("Connected: granted {}", stored.scope));
                let missing: Vec<&String> = opts
                    .scopes
                    .iter()
                    .filter(|s| !granted.contains(*s))
                    .collect();
                if !missing.is_empty() {
                    ui.warn(&format!(
                        "not granted (the person unticked them): {}",
                        missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if opts.show_tokens {
                    println!("access_token:  {}", tokens.access_token);
                    println!("refresh_token: {}", tokens.refresh_token);
                }
                return Ok(stored);
            }
            PollOutcome::Denied(_) => bail!("the request was denied"),
            PollOutcome::Expired(_) if opts.restart_on_expiry => {
                ui.info("The code expired; starting again with a new one.");
            }
            PollOutcome::Expired(_) => {
                bail!(
                    "the code expired before anyone approved it (pass --restart-on-expiry to start again automatically)"
                )
            }
            PollOutcome::Failed(why, _) => bail!("the token endpoint refused: {why}"),
        }
    }
}

fn store_tokens(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    tokens: &TokenResponse,
    token_endpoint: &str,
    server: Option<&AuthServer>,
) -> Result<StoredTokens> {
    let stored = StoredTokens {
        access_token: tokens.access_token.clone(),
        refresh_token: tokens.refresh_token.clone(),
        expires_at: unix_now() + i64::try_from(tokens.expires_in).unwrap_or(0),
        scope: tokens.scope.clone(),
        token_endpoint: token_endpoint.to_owned(),
        revocation_endpoint: server.and_then(|s| s.revocation_endpoint.clone()),
        authorization_details: tokens.authorization_details.clone(),
    };
    let mut all = agent.home.tokens()?;
    all.insert(key_of(&info.iface, sub), stored.clone());
    agent.home.save_tokens(&all)?;
    Ok(stored)
}

/// Refreshes the stored tokens of (iface, sub) and stores the new pair.
/// `Ok(None)` when the grant is gone (the stored tokens are dropped).
pub async fn refresh_stored(
    agent: &Agent,
    iface: &str,
    sub: &str,
    current: &StoredTokens,
) -> Result<Option<StoredTokens>> {
    let res = oauth::refresh(
        &agent.http,
        &agent.signer,
        sub,
        &current.token_endpoint,
        &current.refresh_token,
    )
    .await?;
    let mut all = agent.home.tokens()?;
    if res.status != 200 {
        all.remove(&key_of(iface, sub));
        agent.home.save_tokens(&all)?;
        return Ok(None);
    }
    let t = oauth::parse_token_response(&res)?;
    let stored = StoredTokens {
        access_token: t.access_token,
        refresh_token: t.refresh_token,
        expires_at: unix_now() + i64::try_from(t.expires_in).unwrap_or(0),
        scope: t.scope,
        authorization_details: t.authorization_details,
        ..current.clone()
    };
    all.insert(key_of(iface, sub), stored.clone());
    agent.home.save_tokens(&all)?;
    Ok(Some(stored))
}

/// Options of `send`.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    pub card_url: String,
    pub text: String,
    pub context: Option<String>,
    /// Start a new conversation instead of continuing the remembered one.
    pub new_conversation: bool,
    pub sub: Option<String>,
    /// On a step-up task, connect for the missing scopes without asking.
    pub auto_connect: bool,
    pub show_tokens: bool,
}

/// What a `message:send` produced, for printing.
#[derive(Clone, Debug)]
pub enum Reply {
    Message { text: String, context_id: String },
    StepUp { text: String, missing: Vec<String> },
}

/// Sends one message, handling refresh, step-up and receipts.
pub async fn send(agent: &Agent, opts: &SendOptions, ui: &mut dyn Ui) -> Result<Reply> {
    let (_, info) = card::fetch(&agent.http, &opts.card_url).await?;
    let sub = agent.sub(opts.sub.as_deref());
    let key = key_of(&info.iface, &sub);
    let remembered = if opts.new_conversation || opts.context.is_some() {
        None
    } else {
        agent.home.contexts()?.get(&key).cloned()
    };
    let mut context = opts.context.clone().or(remembered.clone());
    let mut stepped_up = false;
    let mut server: Option<AuthServer> = None;
    loop {
        let outcome =
            send_once(agent, &info, &sub, &opts.text, context.as_deref(), opts, ui).await?;
        match outcome {
            Sent::Reply(v) => {
                if let Some(message) = v.get("message") {
                    let context_id = str_of(message, "contextId");
                    remember_context(agent, &key, &context_id)?;
                    if let Some(receipt) =
                        message.get("metadata").and_then(|m| m.get("pact.receipt"))
                    {
                        if server.is_none() {
                            server = auth_server(&agent.http, &info).await.ok();
                        }
                        keep_receipt(agent, &info, &sub, receipt, server.as_ref(), ui).await?;
                    }
                    return Ok(Reply::Message {
                        text: parts_text(message),
                        context_id,
                    });
                }
                let Some(task) = v.get("task") else {
                    bail!(
                        "the reply is neither a message nor a task: {}",
                        crate::http::excerpt(v.to_string().as_bytes(), 300)
                    );
                };
                let context_id = str_of(task, "contextId");
                remember_context(agent, &key, &context_id)?;
                context = Some(context_id);
                let text = task
                    .get("status")
                    .and_then(|s| s.get("message"))
                    .map(parts_text)
                    .unwrap_or_default();
                let missing: Vec<String> = crate::oauth::strings(
                    task.get("metadata")
                        .and_then(|m| m.get("pact.missingScopes")),
                );
                let state = task
                    .get("status")
                    .and_then(|s| s.get("state"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if state != pact_proto::a2a::TASK_STATE_AUTH_REQUIRED
                    || missing.is_empty()
                    || stepped_up
                {
                    return Ok(Reply::StepUp { text, missing });
                }
                let descriptions = info
                    .delegation
                    .as_ref()
                    .map(|d| d.scopes.clone())
                    .unwrap_or_default();
                ui.info(&format!(
                    "{} needs permissions you have not given yet:",
                    info.name
                ));
                for s in &missing {
                    ui.info(&format!(
                        "  {s}: {}",
                        descriptions.get(s).map(String::as_str).unwrap_or("")
                    ));
                }
                let go = opts.auto_connect || ui.confirm("Connect for them now?");
                if !go {
                    return Ok(Reply::StepUp { text, missing });
                }
                // PACT §5.5: the PA runs §5.1 again for the missing scopes and
                // re-sends in the same context. Use our own link, not the one
                // in the task: only our own device code can be redeemed.
                ui.info(
                    "Use the link below to approve (not one quoted in the brand's message: this agent cannot collect that one).",
                );
                connect_at(
                    agent,
                    &info,
                    &ConnectOptions {
                        card_url: opts.card_url.clone(),
                        scopes: missing,
                        sub: Some(sub.clone()),
                        restart_on_expiry: false,
                        show_tokens: opts.show_tokens,
                        authorization_details: None,
                    },
                    ui,
                )
                .await?;
                stepped_up = true;
            }
            Sent::UnknownContext(e) => {
                if context.is_some() && context == remembered && opts.context.is_none() {
                    ui.info("(the remembered conversation is gone; starting a new one)");
                    forget_context(agent, &key)?;
                    context = None;
                    continue;
                }
                bail!("{}: {}", e.reason.as_str(), e.message);
            }
        }
    }
}

enum Sent {
    Reply(Value),
    UnknownContext(A2aError),
}

fn str_of(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// All text parts joined by newlines.
pub fn parts_text(message: &Value) -> String {
    message
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn remember_context(agent: &Agent, key: &str, context_id: &str) -> Result<()> {
    if context_id.is_empty() {
        return Ok(());
    }
    let mut all = agent.home.contexts()?;
    if all.get(key).map(String::as_str) != Some(context_id) {
        all.insert(key.to_owned(), context_id.to_owned());
        agent.home.save_contexts(&all)?;
    }
    Ok(())
}

fn forget_context(agent: &Agent, key: &str) -> Result<()> {
    let mut all = agent.home.contexts()?;
    all.remove(key);
    agent.home.save_contexts(&all)
}

/// Stored tokens for (iface, sub), refreshed when less than a minute is left.
async fn usable_tokens(
    agent: &Agent,
    iface: &str,
    sub: &str,
    ui: &mut dyn Ui,
) -> Result<Option<StoredTokens>> {
    let Some(current) = agent.home.tokens()?.get(&key_of(iface, sub)).cloned() else {
        return Ok(None);
    };
    if current.expires_at - unix_now() >= REFRESH_MARGIN_SECS {
        return Ok(Some(current));
    }
    let refreshed = refresh_stored(agent, iface, sub, &current).await?;
    if refreshed.is_none() {
        ui.warn("the connection to this brand ended (revoked or expired); connect again to use your permissions");
    }
    Ok(refreshed)
}

fn message_body(text: &str, context: Option<&str>) -> Value {
    let mut message = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                             "parts": [{"text": text}]});
    if let Some(c) = context {
        message["contextId"] = json!(c);
    }
    json!({ "message": message })
}

async fn post_message(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    body: &Value,
    delegation: Option<&str>,
) -> Result<Response> {
    let mut req = Request::post(format!("{}/message:send", info.iface))
        .bearer(agent.signer.token(sub)?)
        .header("A2A-Version", "1.0")
        .json(body.clone());
    if let Some(t) = delegation {
        req = req.header(DELEGATION_HEADER, format!("Bearer {t}"));
    }
    agent.http.send(req).await
}

/// `error="invalid_token"` in a `WWW-Authenticate` (PACT §5.5).
pub fn is_invalid_token(res: &Response) -> bool {
    res.status == 401
        && res
            .header("www-authenticate")
            .is_some_and(|h| h.contains("invalid_token"))
}

async fn send_once(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    text: &str,
    context: Option<&str>,
    opts: &SendOptions,
    ui: &mut dyn Ui,
) -> Result<Sent> {
    let body = message_body(text, context);
    let mut tokens = usable_tokens(agent, &info.iface, sub, ui).await?;
    let mut refreshed_once = false;
    loop {
        let res = post_message(
            agent,
            info,
            sub,
            &body,
            tokens.as_ref().map(|t| t.access_token.as_str()),
        )
        .await?;
        if is_invalid_token(&res) && tokens.is_some() {
            // Refresh once on invalid_token, then resend the same messageId.
            let current = tokens.take();
            if let (false, Some(current)) = (refreshed_once, current) {
                refreshed_once = true;
                tokens = refresh_stored(agent, &info.iface, sub, &current).await?;
                if tokens.is_none() {
                    ui.warn("the delegation is no longer valid (revoked or expired); sending without it");
                }
                if opts.show_tokens
                    && let Some(t) = &tokens
                {
                    println!("access_token:  {}", t.access_token);
                }
            }
            continue;
        }
        if res.status == 401 {
            bail!("{}", agent.registration_hint());
        }
        if res.status == 200 {
            return res
                .json()
                .map(Sent::Reply)
                .ok_or_else(|| anyhow!("the reply is not JSON"));
        }
        if let Some(e) = res.json().as_ref().and_then(A2aError::from_json) {
            if e.reason == pact_proto::ErrorReason::InvalidParams
                && e.message == "Unknown contextId"
            {
                return Ok(Sent::UnknownContext(e));
            }
            bail!("{}: {}", e.reason.as_str(), e.message);
        }
        bail!(
            "HTTP {} from message:send{}",
            res.status,
            if res.body.is_empty() {
                String::new()
            } else {
                format!(": {}", crate::http::excerpt(&res.body, 200))
            }
        );
    }
}

/// Verifies a receipt against the brand's `jwks_uri` and keeps it (PACT §5.6).
async fn keep_receipt(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    receipt: &Value,
    server: Option<&AuthServer>,
    ui: &mut dyn Ui,
) -> Result<()> {
    let jwks_uri = server.map(|s| s.jwks_uri.clone()).unwrap_or_default();
    let verdict = match server {
        None => Err("cannot read the brand's metadata".to_owned()),
        Some(s) => match oauth::provider_keys(&agent.http, &s.jwks_uri).await {
            Ok((_, keys)) => oauth::verify_receipt(&keys, receipt),
            Err(e) => Err(format!("cannot fetch the brand's keys: {e}")),
        },
    };
    let verified = verdict.is_ok();
    match &verdict {
        Ok(c) => ui.info(&format!(
            "(receipt verified: grant {}, scopes used [{}], actions [{}])",
            c.grant_id,
            c.scopes_used.join(", "),
            c.actions
                .iter()
                .map(|a| a.tool.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(why) => ui.warn(&format!("the receipt does NOT verify: {why}")),
    }
    agent.home.keep_receipt(StoredReceipt {
        brand: info.iface.clone(),
        sub: sub.to_owned(),
        jwks_uri,
        received_at: unix_now(),
        receipt: receipt.clone(),
        verified,
    })?;
    Ok(())
}

/// One line of `pact-agent receipts`.
#[derive(Clone, Debug)]
pub struct ReceiptCheck {
    pub stored: StoredReceipt,
    pub signature: Result<(), String>,
    /// `None` when the receipt has no `prev` (the chain is a pactd extension).
    pub chain: Option<Result<(), String>>,
}

/// Re-verifies every kept receipt and the `prev` chain of each grant.
pub async fn check_receipts(agent: &Agent) -> Result<Vec<ReceiptCheck>> {
    let all = agent.home.receipts()?;
    let mut keys: BTreeMap<String, Result<pact_jose::ProviderKeySet, String>> = BTreeMap::new();
    let mut last_of_grant: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::with_capacity(all.len());
    for stored in all {
        if !keys.contains_key(&stored.jwks_uri) {
            let fetched = oauth::provider_keys(&agent.http, &stored.jwks_uri)
                .await
                .map(|(_, k)| k)
                .map_err(|e| e.to_string());
            keys.insert(stored.jwks_uri.clone(), fetched);
        }
        let signature = match keys.get(&stored.jwks_uri) {
            Some(Ok(k)) => oauth::verify_receipt(k, &stored.receipt).map(|_| ()),
            Some(Err(e)) => Err(format!("cannot fetch keys: {e}")),
            None => Err("no keys".to_owned()),
        };
        let claims = stored.receipt.get("claims");
        let grant = claims
            .and_then(|c| c.get("grantId"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let jws = stored
            .receipt
            .get("jws")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let chain = claims
            .and_then(|c| c.get("prev"))
            .and_then(Value::as_str)
            .map(|prev| match last_of_grant.get(&grant) {
                Some(last) if pact_jose::receipt_hash(last) == prev => Ok(()),
                Some(_) => Err("prev does not name the previous kept receipt of this grant (one is missing, or the chain is broken)".to_owned()),
                None => Ok(()),
            });
        last_of_grant.insert(grant, jws);
        out.push(ReceiptCheck {
            stored,
            signature,
            chain,
        });
    }
    Ok(out)
}

/// The claims of a delegation token, unverified, for display.
pub fn token_summary(token: &str) -> Option<String> {
    let (_, c) = decode_unverified(token)?;
    Some(format!(
        "sub {} scope [{}] expires {}",
        c.get("sub").and_then(Value::as_str).unwrap_or("?"),
        c.get("scope").and_then(Value::as_str).unwrap_or(""),
        c.get("exp").and_then(Value::as_i64).unwrap_or(0)
    ))
}
