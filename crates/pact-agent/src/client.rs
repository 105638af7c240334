//! The personal agent's commands: `send`, `connect`, `receipts`.
//!
//! `send` talks A2A (PACT §4) with a PA-JWT and, when the user connected,
//! the delegation token (§5.5), refreshing it transparently; it remembers
//! the conversation per brand and `sub`, follows a step-up task by waiting
//! for the approval of the missing scopes and asking again, and verifies and
//! keeps every receipt, step-up tasks' included (§5.6). `connect` runs the device flow (§5.1, §5.3) as a careful client.

use std::collections::{BTreeMap, BTreeSet};

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
pub use pact_proto::a2a::DELEGATION_HEADER;

/// How the commands talk to the person.
pub trait Ui: Send {
    fn info(&mut self, msg: &str);
    fn warn(&mut self, msg: &str);
    /// Shows the link and code of a device authorization (and a QR code).
    fn show_link(&mut self, device: &DeviceAuthorizationResponse);
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
            "{} offers no delegation (its card has no OAuth device-code scheme)",
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
    let sub = agent.sub(opts.sub.as_deref());
    ui.info(&format!("Asking {} for:", info.name));
    for s in &opts.scopes {
        ui.info(&format!(
            "  {s}: {}",
            d.scopes.get(s).map(String::as_str).unwrap_or("")
        ));
    }
    loop {
        let device = request_device(
            agent,
            d,
            &sub,
            &opts.scopes,
            opts.authorization_details.as_deref(),
        )
        .await?;
        ui.show_link(&device);
        let decided = collect(
            agent,
            info,
            &sub,
            &device,
            &opts.scopes,
            opts.show_tokens,
            ui,
        )
        .await?;
        match decided {
            Decided::Granted(stored) => return Ok(stored),
            Decided::Denied => bail!("the request was denied"),
            Decided::Expired if opts.restart_on_expiry => {
                ui.info("The code expired; starting again with a new one.");
            }
            Decided::Expired => {
                bail!(
                    "the code expired before anyone approved it (pass --restart-on-expiry to start again automatically)"
                )
            }
            Decided::Failed(why) => bail!("the token endpoint refused: {why}"),
        }
    }
}

/// RFC 8628 §3.1 (PACT §5.1): a device authorization for `scopes`.
async fn request_device(
    agent: &Agent,
    d: &card::DelegationInfo,
    sub: &str,
    scopes: &[String],
    authorization_details: Option<&str>,
) -> Result<DeviceAuthorizationResponse> {
    let res = oauth::device_authorize(
        &agent.http,
        &agent.signer,
        sub,
        &d.device_authorization_url,
        scopes,
        authorization_details,
    )
    .await?;
    if res.status == 401 && oauth::oauth_error_code(&res).is_none() {
        bail!("{}", agent.registration_hint());
    }
    oauth::parse_device_response(&res)
}

/// How a device authorization ended.
enum Decided {
    /// Approved; the tokens are stored.
    Granted(StoredTokens),
    Denied,
    Expired,
    Failed(String),
}

/// Polls for `device` (RFC 8628 §3.4–3.5, PACT §5.3) and stores the tokens,
/// saying which of `requested` the person did not grant.
async fn collect(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    device: &DeviceAuthorizationResponse,
    requested: &[String],
    show_tokens: bool,
    ui: &mut dyn Ui,
) -> Result<Decided> {
    let d = delegation_of(info)?;
    let mut events = |e: PollEvent| match e {
        PollEvent::Pending => {}
        PollEvent::SlowDown { interval } => ui.info(&format!(
            "(the server asked us to slow down: checking every {interval} s)"
        )),
    };
    let outcome = oauth::poll_until_decided(
        &agent.http,
        &agent.signer,
        sub,
        &d.token_url,
        device,
        &mut events,
    )
    .await?;
    Ok(match outcome {
        PollOutcome::Granted { tokens, .. } => {
            // The revocation endpoint is kept with the tokens (RFC 7009).
            let server = oauth::discover(&agent.http, &d.metadata_url)
                .await
                .ok()
                .map(|(_, s)| s);
            let stored = store_tokens(agent, info, sub, &tokens, &d.token_url, server.as_ref())?;
            let granted: BTreeSet<String> = stored.scopes().into_iter().collect();
            ui.info(&format!("Connected: granted {}", stored.scope));
            let missing: Vec<&str> = requested
                .iter()
                .filter(|s| !granted.contains(*s))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                ui.warn(&format!(
                    "not granted (the person unticked them): {}",
                    missing.join(", ")
                ));
            }
            if show_tokens {
                println!("access_token:  {}", tokens.access_token);
                println!("refresh_token: {}", tokens.refresh_token);
            }
            Decided::Granted(stored)
        }
        PollOutcome::Denied(_) => Decided::Denied,
        PollOutcome::Expired(_) => Decided::Expired,
        PollOutcome::Failed(why, _) => Decided::Failed(why),
    })
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
    /// On a step-up task, return its message instead of waiting for the
    /// approval and asking again (PACT §5.5; waiting is the default).
    pub no_wait: bool,
    pub show_tokens: bool,
}

/// What a `message:send` produced, for printing.
#[derive(Clone, Debug)]
pub enum Reply {
    Message {
        text: String,
        context_id: String,
    },
    /// A step-up task (PACT §5.5) that was not followed (`no_wait`), or
    /// that came again after following one.
    StepUp {
        text: String,
        missing: Vec<String>,
        /// The task's `pact.verificationUriComplete`, when it has one.
        link: Option<String>,
    },
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
                // PACT §5.6: every delegated turn is receipted, a step-up
                // task's too; each receipt is a link of its grant's chain,
                // so dropping one breaks the chain the PA checks later.
                if let Some(receipt) = receipt_of(&v) {
                    if server.is_none() {
                        server = auth_server(&agent.http, &info).await.ok();
                    }
                    keep_receipt(agent, &info, &sub, receipt, server.as_ref(), ui).await?;
                }
                if let Some(message) = v.get("message") {
                    let context_id = str_of(message, "contextId");
                    remember_context(agent, &key, &context_id)?;
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
                let metadata = task.get("metadata");
                let missing: Vec<String> =
                    crate::oauth::strings(metadata.and_then(|m| m.get("pact.missingScopes")));
                let link = metadata
                    .and_then(|m| m.get("pact.verificationUriComplete"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let state = task
                    .get("status")
                    .and_then(|s| s.get("state"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if state != pact_proto::a2a::TASK_STATE_AUTH_REQUIRED
                    || missing.is_empty()
                    || stepped_up
                    || opts.no_wait
                {
                    return Ok(Reply::StepUp {
                        text,
                        missing,
                        link,
                    });
                }
                // The store's message is what the person reads: it names the
                // link to open. This agent then waits and asks again itself,
                // so "approve, then ask again" needs nothing more of them.
                ui.info(&text);
                follow_step_up(agent, &info, &sub, &missing, link.as_deref(), opts, ui).await?;
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

/// The receipt of a `message:send` reply (PACT §5.6): in the metadata of
/// the reply message, or — for a task, such as a §5.5 step-up — of the
/// message in its status.
pub fn receipt_of(reply: &Value) -> Option<&Value> {
    let message = match reply.get("message") {
        Some(m) => m,
        None => reply.get("task")?.get("status")?.get("message")?,
    };
    message.get("metadata")?.get("pact.receipt")
}

/// PACT §5.5: after a step-up task the PA runs §5.1 again for the missing
/// scopes, then re-sends in the same context. pactd gives that device
/// authorization the step-up authorization the task's link names (when it
/// is still live, for exactly these scopes, for this PA and user), so the
/// person approves the link in the store's message once and this agent
/// collects that very approval. When the Provider hands out another code,
/// the person is told to approve that one instead: only it can be redeemed.
async fn follow_step_up(
    agent: &Agent,
    info: &CardInfo,
    sub: &str,
    missing: &[String],
    link: Option<&str>,
    opts: &SendOptions,
    ui: &mut dyn Ui,
) -> Result<()> {
    let d = delegation_of(info)?;
    ui.info(&format!(
        "{} needs permissions you have not given yet:",
        info.name
    ));
    for s in missing {
        ui.info(&format!(
            "  {s}: {}",
            d.scopes.get(s).map(String::as_str).unwrap_or("")
        ));
    }
    let device = request_device(agent, d, sub, missing, None).await?;
    match link.and_then(user_code_in_link) {
        Some(linked) if same_user_code(&linked, &device.user_code) => ui.info(&format!(
            "Approve it at the link in {}'s message (code {}); this agent waits for the \
             approval and then asks again by itself.",
            info.name, device.user_code
        )),
        Some(linked) => ui.warn(&format!(
            "the link in {}'s message (code {linked}) is not a request this agent can collect; \
             approve code {} below instead. This agent waits for it and then asks again by \
             itself.",
            info.name, device.user_code
        )),
        None => ui.info(
            "Approve it at the link below; this agent waits for the approval and then asks \
             again by itself.",
        ),
    }
    ui.show_link(&device);
    match collect(agent, info, sub, &device, missing, opts.show_tokens, ui).await? {
        Decided::Granted(_) => Ok(()),
        Decided::Denied => bail!("the request was denied, so the message was not sent again"),
        Decided::Expired => bail!(
            "the code expired before anyone approved it; send the message again for a new one"
        ),
        Decided::Failed(why) => bail!("the token endpoint refused: {why}"),
    }
}

/// The `user_code` of a verification link (RFC 8628 §3.3.1).
pub fn user_code_in_link(link: &str) -> Option<String> {
    url::Url::parse(link)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == "user_code")
        .map(|(_, v)| v.into_owned())
}

/// Whether two user codes are the same once case, dashes and spaces are
/// ignored (RFC 8628 §6.1: people type them in any of those forms).
pub fn same_user_code(a: &str, b: &str) -> bool {
    let norm = |c: &str| -> String {
        c.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_uppercase())
            .collect()
    };
    let (a, b) = (norm(a), norm(b));
    !a.is_empty() && a == b
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
        receipt_keys_uri: server.and_then(|s| s.receipt_keys_uri.clone()),
        receipt_tree_head_uri: server.and_then(|s| s.receipt_tree_head_uri.clone()),
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
    /// `None` when the brand does not chain receipts (the chain is a pactd
    /// extension), see [`chain_verdicts`].
    pub chain: Option<Result<(), String>>,
}

/// Re-verifies every kept receipt and the `prev` chain of each grant.
pub async fn check_receipts(agent: &Agent) -> Result<Vec<ReceiptCheck>> {
    let all = agent.home.receipts()?;
    let mut keys: BTreeMap<String, Result<pact_jose::ProviderKeySet, String>> = BTreeMap::new();
    let chains = chain_verdicts(&all);
    let mut out = Vec::with_capacity(all.len());
    for (stored, chain) in all.into_iter().zip(chains) {
        let mut signature = verify_with(agent, &mut keys, &stored.jwks_uri, &stored.receipt).await;
        // A key leaves `jwks_uri` once no token it signed can be alive; the
        // brand's receipt key archive keeps it for as long as receipts are.
        if signature.is_err()
            && let Some(archive) = &stored.receipt_keys_uri
        {
            let archived = verify_with(agent, &mut keys, archive, &stored.receipt).await;
            if archived.is_ok() {
                signature = archived;
            }
        }
        out.push(ReceiptCheck {
            stored,
            signature,
            chain,
        });
    }
    Ok(out)
}

/// Verifies a receipt against the JWKS at `uri` (fetched once per run).
async fn verify_with(
    agent: &Agent,
    keys: &mut BTreeMap<String, Result<pact_jose::ProviderKeySet, String>>,
    uri: &str,
    receipt: &Value,
) -> Result<(), String> {
    if !keys.contains_key(uri) {
        let fetched = oauth::provider_keys(&agent.http, uri)
            .await
            .map(|(_, k)| k)
            .map_err(|e| e.to_string());
        keys.insert(uri.to_owned(), fetched);
    }
    match keys.get(uri) {
        Some(Ok(k)) => oauth::verify_receipt(k, receipt).map(|_| ()),
        Some(Err(e)) => Err(format!("cannot fetch keys: {e}")),
        None => Err("no keys".to_owned()),
    }
}

/// One kept receipt's place in its grant's chain.
struct Link<'a> {
    index: usize,
    jws: &'a str,
    /// `Err` when `prev` is present but not a string.
    prev: Result<Option<&'a str>, ()>,
}

/// The chain verdict of each kept receipt, in the same order (a pactd
/// extension of PACT §5.6: each receipt's `prev` is the hash of the grant's
/// previous receipt, the first has none). Since the PA keeps every receipt
/// it is given — on replies and on step-up tasks alike — each grant's kept
/// receipts must form exactly one unbroken line from the grant's first
/// receipt: one start, every `prev` naming a kept receipt of the same grant,
/// no receipt named twice. A chain that restarts, skips a receipt (one not
/// kept, or deleted), forks, or starts mid-way is broken.
///
/// The order receipts were kept in is not checked: two sends racing on one
/// grant may come back in either order, and `prev` alone fixes the sequence.
///
/// `None` ("no chain") for a brand none of whose kept receipts has a `prev`:
/// that Provider does not chain (the chain is not part of PACT 1.0). Once a
/// brand has chained any receipt, every grant at it is expected to chain, so
/// two receipts of one grant without `prev` are a restart, not "no chain".
pub fn chain_verdicts(all: &[StoredReceipt]) -> Vec<Option<Result<(), String>>> {
    let chaining_brands: BTreeSet<&str> = all
        .iter()
        .filter(|r| {
            r.receipt
                .get("claims")
                .and_then(|c| c.get("prev"))
                .is_some()
        })
        .map(|r| r.brand.as_str())
        .collect();
    // Receipts are grouped by (brand, grant): a grant id is the Provider's,
    // so two brands' ids never share a chain.
    let mut grants: BTreeMap<(String, String), Vec<Link<'_>>> = BTreeMap::new();
    for (index, r) in all.iter().enumerate() {
        let claims = r.receipt.get("claims");
        let grant = claims
            .and_then(|c| c.get("grantId"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let prev = match claims.and_then(|c| c.get("prev")) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(p)) => Ok(Some(p.as_str())),
            Some(_) => Err(()),
        };
        let jws = r.receipt.get("jws").and_then(Value::as_str).unwrap_or("");
        grants
            .entry((r.brand.clone(), grant))
            .or_default()
            .push(Link { index, jws, prev });
    }
    let mut out: Vec<Option<Result<(), String>>> = vec![None; all.len()];
    for ((brand, _), links) in &grants {
        if !chaining_brands.contains(brand.as_str()) {
            continue;
        }
        let by_hash: BTreeMap<String, usize> = links
            .iter()
            .map(|l| (pact_jose::receipt_hash(l.jws), l.index))
            .collect();
        let mut started = false;
        let mut named: BTreeSet<&str> = BTreeSet::new();
        for l in links {
            let verdict = match l.prev {
                Err(()) => Err("prev is not a string".to_owned()),
                Ok(None) if started => Err(
                    "the chain restarts: another kept receipt of this grant already has no prev"
                        .to_owned(),
                ),
                Ok(None) => {
                    started = true;
                    Ok(())
                }
                Ok(Some(p)) => match by_hash.get(p) {
                    None => Err(
                        "prev names no kept receipt of this grant: the chain skips one (never \
                         kept, or removed), starts after the grant's first receipt, or names \
                         another grant's receipt"
                            .to_owned(),
                    ),
                    Some(_) if !named.insert(p) => Err(
                        "the chain forks: another kept receipt of this grant has the same prev"
                            .to_owned(),
                    ),
                    Some(_) => Ok(()),
                },
            };
            if let Some(slot) = out.get_mut(l.index) {
                *slot = Some(verdict);
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const BRAND: &str = "https://p.example/a2a/demo";

    /// A receipt of `grant` as a brand would chain it after `prev` (the
    /// signature is not the point here: `check_receipts` verifies it apart).
    fn receipt(grant: &str, n: u32, prev: Option<&Value>) -> Value {
        let jws = format!("h.{grant}-{n}.s");
        let mut claims = json!({"grantId": grant, "scopesUsed": [], "actions": []});
        if let Some(p) = prev {
            claims["prev"] = json!(pact_jose::receipt_hash(p["jws"].as_str().unwrap()));
        }
        json!({"jws": jws, "claims": claims})
    }

    fn kept(receipt: &Value) -> StoredReceipt {
        kept_at(BRAND, receipt)
    }

    fn kept_at(brand: &str, receipt: &Value) -> StoredReceipt {
        StoredReceipt {
            brand: brand.into(),
            sub: "s".into(),
            jwks_uri: "j".into(),
            receipt_keys_uri: None,
            receipt_tree_head_uri: None,
            received_at: 1,
            receipt: receipt.clone(),
            verified: true,
        }
    }

    fn message_reply(r: &Value) -> Value {
        json!({"message": {"messageId": "m", "contextId": "c", "role": "ROLE_AGENT",
                           "parts": [{"text": "ok"}], "metadata": {"pact.receipt": r}}})
    }

    fn step_up_reply(r: &Value) -> Value {
        json!({"task": {"id": "t", "contextId": "c",
                        "status": {"state": "TASK_STATE_AUTH_REQUIRED",
                                   "message": {"messageId": "m", "contextId": "c",
                                               "role": "ROLE_AGENT", "parts": [{"text": "open …"}],
                                               "metadata": {"pact.receipt": r}}},
                        "metadata": {"pact.missingScopes": ["orders:cancel"]}}})
    }

    fn broken(v: &Option<Result<(), String>>) -> bool {
        matches!(v, Some(Err(_)))
    }

    #[test]
    fn the_user_code_of_a_link_is_compared_as_people_type_it() {
        let link = "http://localhost:8080/device?user_code=KCZZ-VZDQ";
        let code = user_code_in_link(link).unwrap();
        assert!(same_user_code(&code, "KCZZ-VZDQ"));
        assert!(same_user_code(&code, "kczzvzdq"));
        assert!(!same_user_code(&code, "PGCQ-SXNV"));
        assert!(!same_user_code("", ""));
        assert_eq!(user_code_in_link("http://localhost:8080/device"), None);
        assert_eq!(user_code_in_link("not a link"), None);
    }

    #[test]
    fn receipts_are_found_on_messages_and_on_step_up_tasks() {
        let r = receipt("g1", 1, None);
        assert_eq!(receipt_of(&message_reply(&r)), Some(&r));
        assert_eq!(receipt_of(&step_up_reply(&r)), Some(&r));
        assert_eq!(receipt_of(&json!({"message": {"parts": []}})), None);
        assert_eq!(receipt_of(&json!({"task": {"status": {}}})), None);
    }

    /// The journey of issue 9: a message, a step-up on the same grant, then
    /// the old grant goes on (asked again without connecting) and the new
    /// grant starts its own chain. Keeping what `receipt_of` finds in every
    /// reply leaves every chain intact; keeping only message receipts (the
    /// old behaviour) reports the next receipt of the grant as broken.
    #[test]
    fn a_step_up_receipt_is_a_link_of_its_grant_chain() {
        let r1 = receipt("g1", 1, None);
        let r2 = receipt("g1", 2, Some(&r1));
        let r3 = receipt("g1", 3, Some(&r2));
        let n1 = receipt("g2", 1, None);
        let n2 = receipt("g2", 2, Some(&n1));
        let replies = [
            message_reply(&r1),
            step_up_reply(&r2),
            message_reply(&r3),
            message_reply(&n1),
            message_reply(&n2),
        ];
        let all: Vec<StoredReceipt> = replies.iter().filter_map(receipt_of).map(kept).collect();
        assert_eq!(all.len(), 5);
        let verdicts = chain_verdicts(&all);
        assert!(verdicts.iter().all(|v| v == &Some(Ok(()))), "{verdicts:?}");

        let messages_only: Vec<StoredReceipt> = replies
            .iter()
            .filter_map(|v| v.get("message")?.get("metadata")?.get("pact.receipt"))
            .map(kept)
            .collect();
        let verdicts = chain_verdicts(&messages_only);
        assert_eq!(verdicts.len(), 4);
        assert!(
            broken(&verdicts[1]),
            "r3 follows the dropped r2: {verdicts:?}"
        );
        assert!(!broken(&verdicts[0]) && !broken(&verdicts[2]) && !broken(&verdicts[3]));
    }

    #[test]
    fn a_chain_that_restarts_is_broken() {
        let r1 = receipt("g1", 1, None);
        let r2 = receipt("g1", 2, Some(&r1));
        let again = receipt("g1", 3, None);
        let v = chain_verdicts(&[kept(&r1), kept(&r2), kept(&again)]);
        assert_eq!(v[..2], [Some(Ok(())), Some(Ok(()))]);
        assert!(broken(&v[2]), "{v:?}");
        assert!(
            v[2].as_ref()
                .unwrap()
                .as_ref()
                .unwrap_err()
                .contains("restarts")
        );

        // At a brand that chains, a grant whose receipts all lack prev has
        // restarted too (it is not a Provider that does not chain).
        let other = receipt("g2", 1, None);
        let other_again = receipt("g2", 2, None);
        let v = chain_verdicts(&[kept(&r1), kept(&r2), kept(&other), kept(&other_again)]);
        assert_eq!(v[2], Some(Ok(())));
        assert!(broken(&v[3]), "{v:?}");
    }

    #[test]
    fn a_chain_that_skips_forks_or_starts_mid_way_is_broken() {
        let r1 = receipt("g1", 1, None);
        let r2 = receipt("g1", 2, Some(&r1));
        let r3 = receipt("g1", 3, Some(&r2));
        // r2 was never kept (or was removed from receipts.json).
        let v = chain_verdicts(&[kept(&r1), kept(&r3)]);
        assert_eq!(v[0], Some(Ok(())));
        assert!(broken(&v[1]), "{v:?}");
        // The first receipts of the grant were never kept.
        let v = chain_verdicts(&[kept(&r2), kept(&r3)]);
        assert!(broken(&v[0]), "{v:?}");
        assert_eq!(v[1], Some(Ok(())));
        // Two receipts claim the same predecessor.
        let fork = receipt("g1", 9, Some(&r1));
        let v = chain_verdicts(&[kept(&r1), kept(&r2), kept(&fork)]);
        assert_eq!(v[..2], [Some(Ok(())), Some(Ok(()))]);
        assert!(broken(&v[2]), "{v:?}");
        // A prev naming another grant's receipt.
        let g2 = receipt("g2", 1, Some(&r1));
        let v = chain_verdicts(&[kept(&r1), kept(&g2)]);
        assert!(broken(&v[1]), "{v:?}");
        // A prev that is not a hash string.
        let mut odd = receipt("g1", 2, None);
        odd["claims"]["prev"] = json!(1);
        let v = chain_verdicts(&[kept(&r1), kept(&odd)]);
        assert!(broken(&v[1]), "{v:?}");
    }

    #[test]
    fn chains_are_per_grant_and_brand_in_any_kept_order() {
        let a1 = receipt("g1", 1, None);
        let b1 = receipt("g2", 1, None);
        let a2 = receipt("g1", 2, Some(&a1));
        let b2 = receipt("g2", 2, Some(&b1));
        let a3 = receipt("g1", 3, Some(&a2));
        // Interleaved grants, and two racing sends kept out of order.
        let v = chain_verdicts(&[kept(&a1), kept(&b1), kept(&a3), kept(&b2), kept(&a2)]);
        assert!(v.iter().all(|x| x == &Some(Ok(()))), "{v:?}");
        // The same grant id at another brand is another chain.
        let v = chain_verdicts(&[
            kept(&a1),
            kept(&a2),
            kept_at("https://q.example/a2a/x", &a3),
        ]);
        assert!(broken(&v[2]), "{v:?}");
    }

    #[test]
    fn a_brand_that_does_not_chain_has_no_chain_verdict() {
        let r1 = receipt("g1", 1, None);
        let r2 = receipt("g1", 2, None);
        assert_eq!(chain_verdicts(&[kept(&r1), kept(&r2)]), vec![None, None]);
        assert!(chain_verdicts(&[]).is_empty());
    }
}
