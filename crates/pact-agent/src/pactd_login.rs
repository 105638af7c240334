//! Deciding a device authorization on pactd's own pages, over plain HTTP,
//! as a person with a browser would (PACT §5.2; pactd's URL map is in
//! `docs/web-pages.md`): open the link, confirm the code, sign in with a
//! built-in account (email, password, then an authenticator code when
//! asked), tick the scopes on the consent page, press Approve or Deny, and
//! land on "Done".
//!
//! The client keeps cookies (the session), reads each form's hidden fields
//! (the CSRF token among them), sends `Origin: <the link's origin>` on every
//! POST as browsers do, and follows each redirect itself, so every step is
//! checked and a failure names the step and shows the page's own message.
//! One [`PactdBrowser`] is one person's browser: it stays signed in between
//! decisions, so the second factor is asked once per account.
//!
//! The password and the authenticator secret are never shown: not in
//! `Debug`, not in errors.

use std::fmt;
use std::time::Duration;

use anyhow::{Context as _, Result};
use reqwest::{Client, Url, redirect};
use tokio::sync::Mutex;

use crate::totp::{self, TotpSecret};

/// Redirects followed for one decision before giving up.
const MAX_STEPS: usize = 12;
/// How often one decision may post the consent form (a second time after a
/// step-up for a scope that needs a recent second factor).
const MAX_CONSENT_POSTS: usize = 2;
/// Longest page message quoted in an error.
const MAX_MESSAGE: usize = 400;
/// Timeout of each request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A built-in account at the brand.
#[derive(Clone)]
pub struct LoginAccount {
    pub email: String,
    password: String,
    totp: Option<TotpSecret>,
}

impl fmt::Debug for LoginAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginAccount")
            .field("email", &self.email)
            .field("totp", &self.totp.is_some())
            .finish_non_exhaustive()
    }
}

impl LoginAccount {
    /// `totp` is the authenticator secret, when the account has one.
    pub fn new(
        email: impl Into<String>,
        password: impl Into<String>,
        totp: Option<TotpSecret>,
    ) -> Self {
        Self {
            email: email.into(),
            password: password.into(),
            totp,
        }
    }
}

/// What to press on the consent page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageDecision {
    /// Approve with exactly these scopes ticked; with none given, the ones
    /// the page ticks already (everything requested).
    Approve(Vec<String>),
    Deny,
}

/// The link the agent shows (RFC 8628 §3.2).
#[derive(Clone, Copy, Debug)]
pub struct DeviceLink<'a> {
    /// `verification_uri_complete`, when there is one (empty counts as none).
    pub verification_uri_complete: Option<&'a str>,
    pub verification_uri: &'a str,
    pub user_code: &'a str,
}

/// What happened on the pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decided {
    /// The scopes ticked when approving (empty when denied).
    pub scopes: Vec<String>,
    /// The browser had to sign in (it was not signed in yet).
    pub signed_in: bool,
    /// An authenticator code was entered.
    pub second_factor: bool,
    /// The first code had been used already, so the next step's code was entered.
    pub waited_for_next_code: bool,
}

/// Which step failed and what the page said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageFailure {
    /// E.g. `sign in (POST /login)`.
    pub step: String,
    /// E.g. `HTTP 400: That email and password don't match an account here.`
    pub detail: String,
}

impl fmt::Display for PageFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.detail)
    }
}

impl std::error::Error for PageFailure {}

/// One person's browser at pactd.
pub struct PactdBrowser {
    client: Client,
    account: LoginAccount,
    /// One decision at a time: the session remembers one request.
    busy: Mutex<()>,
}

impl fmt::Debug for PactdBrowser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PactdBrowser")
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

/// A page as fetched: no redirect followed.
struct Page {
    status: u16,
    url: Url,
    location: Option<Url>,
    body: String,
}

/// A step's name and its request line, for errors.
struct Step {
    name: &'static str,
    method: &'static str,
    url: Url,
}

impl Step {
    fn new(name: &'static str, method: &'static str, url: &Url) -> Self {
        Self {
            name,
            method,
            url: url.clone(),
        }
    }

    fn fail(&self, detail: impl Into<String>) -> PageFailure {
        PageFailure {
            step: format!("{} ({} {})", self.name, self.method, self.url.path()),
            detail: detail.into(),
        }
    }

    /// The page was not what this step expects: its status and message.
    fn unexpected(&self, page: &Page, expected: &str) -> PageFailure {
        self.fail(format!(
            "HTTP {} (expected {expected}): {}",
            page.status,
            page_message(&page.body)
        ))
    }
}

impl PactdBrowser {
    pub fn new(account: LoginAccount) -> Result<Self> {
        let client = Client::builder()
            .cookie_store(true)
            .redirect(redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!(
                "pact-agent/",
                env!("CARGO_PKG_VERSION"),
                " (pactd-login)"
            ))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            client,
            account,
            busy: Mutex::new(()),
        })
    }

    pub fn email(&self) -> &str {
        &self.account.email
    }

    /// Opens the link and decides on it, through every page in between.
    pub async fn decide(
        &self,
        link: DeviceLink<'_>,
        decision: &PageDecision,
    ) -> Result<Decided, PageFailure> {
        let _one_at_a_time = self.busy.lock().await;
        let start = link
            .verification_uri_complete
            .filter(|l| !l.is_empty())
            .unwrap_or(link.verification_uri);
        let start = Url::parse(start).map_err(|e| PageFailure {
            step: "open the link".to_owned(),
            detail: format!("{start:?} is not a URL: {e}"),
        })?;
        // What a browser sends as `Origin` from pactd's own pages.
        let origin = start.origin().ascii_serialization();
        let mut decided = Decided::default();

        // The link: the code-entry form, pre-filled.
        let step = Step::new("open the link", "GET", &start);
        let page = self.get(&step).await?;
        if page.status != 200 {
            return Err(step.unexpected(&page, "200 and the code-entry form"));
        }
        let form = forms(&page.body)
            .into_iter()
            .find(|f| f.has_input("user_code"))
            .ok_or_else(|| step.fail("the page shows no code-entry form"))?;
        let action = form.action_url(&page.url).map_err(|e| step.fail(e))?;

        // Confirm the code.
        let step = Step::new("enter the code", "POST", &action);
        let mut fields = form.hidden();
        fields.push(("user_code".to_owned(), link.user_code.to_owned()));
        let page = self.post(&step, &origin, &fields).await?;
        let mut next = match page.location.clone() {
            Some(to) if page.status == 303 => to,
            _ if page.status == 200 => {
                return Err(step.fail(format!(
                    "pactd showed a page instead of sending the browser on: {} (a brand that \
                     signs people in with its own login cannot be driven by pactd-login)",
                    page_message(&page.body)
                )));
            }
            _ => return Err(step.unexpected(&page, "303")),
        };

        let mut consent_posts = 0;
        for _ in 0..MAX_STEPS {
            next = match next.path() {
                "/login" => self.sign_in(&next, &origin, &mut decided).await?,
                "/login/second-factor" => self.second_factor(&next, &origin, &mut decided).await?,
                "/device/consent" => {
                    consent_posts += 1;
                    if consent_posts > MAX_CONSENT_POSTS {
                        return Err(Step::new("decide", "GET", &next)
                            .fail("pactd keeps sending the browser back to the consent page"));
                    }
                    self.consent(&next, &origin, link.user_code, decision, &mut decided)
                        .await?
                }
                "/device/done" => {
                    self.done(&next, decision).await?;
                    return Ok(decided);
                }
                "/account/totp" => {
                    return Err(Step::new("sign in", "GET", &next).fail(format!(
                        "the brand asks every account for a second factor and {} has no \
                         authenticator app yet: set one up first (its secret is what \
                         --totp-secret takes)",
                        self.account.email
                    )));
                }
                "/device" => {
                    return Err(Step::new("decide", "GET", &next).fail(
                        "pactd sent the browser back to code entry: the session no longer \
                         holds the request",
                    ));
                }
                other => {
                    return Err(Step::new("decide", "GET", &next)
                        .fail(format!("unexpected redirect to {other}")));
                }
            };
        }
        Err(PageFailure {
            step: "decide".to_owned(),
            detail: format!("more than {MAX_STEPS} redirects"),
        })
    }

    /// `/login?brand=…&next=…`: email and password.
    async fn sign_in(
        &self,
        url: &Url,
        origin: &str,
        decided: &mut Decided,
    ) -> Result<Url, PageFailure> {
        let step = Step::new("open the sign-in page", "GET", url);
        let page = self.get(&step).await?;
        if let Some(to) = redirected(&page) {
            // Already signed in for this brand.
            return Ok(to);
        }
        if page.status != 200 {
            return Err(step.unexpected(&page, "200 and the sign-in form"));
        }
        let form = forms(&page.body)
            .into_iter()
            .find(|f| f.has_input("email") && f.has_input("password"))
            .ok_or_else(|| step.fail("the page shows no email and password form"))?;
        let action = form.action_url(&page.url).map_err(|e| step.fail(e))?;
        let step = Step::new("sign in", "POST", &action);
        let mut fields = form.hidden();
        fields.push(("email".to_owned(), self.account.email.clone()));
        fields.push(("password".to_owned(), self.account.password.clone()));
        let page = self.post(&step, origin, &fields).await?;
        decided.signed_in = true;
        redirected(&page).ok_or_else(|| step.unexpected(&page, "303"))
    }

    /// `/login/second-factor?next=…`: the authenticator code; once more with
    /// the next step's code when pactd says this one was used already.
    async fn second_factor(
        &self,
        url: &Url,
        origin: &str,
        decided: &mut Decided,
    ) -> Result<Url, PageFailure> {
        let step = Step::new("open the second-factor page", "GET", url);
        let mut page = self.get(&step).await?;
        if let Some(to) = redirected(&page) {
            return Ok(to);
        }
        if page.status != 200 {
            return Err(step.unexpected(&page, "200 and the authenticator-code form"));
        }
        let Some(secret) = &self.account.totp else {
            return Err(step.fail(format!(
                "pactd asks {} for an authenticator code: pass --totp-secret (or \
                 PACT_AGENT_TOTP_SECRET), the base32 key the authenticator app was given",
                self.account.email
            )));
        };
        let mut retried = false;
        loop {
            let form = forms(&page.body)
                .into_iter()
                .find(|f| f.has_input("code"))
                .ok_or_else(|| {
                    step.fail(format!(
                        "the page shows no authenticator-code form: {}",
                        page_message(&page.body)
                    ))
                })?;
            let action = form.action_url(&page.url).map_err(|e| step.fail(e))?;
            let post = Step::new("enter the authenticator code", "POST", &action);
            let code = secret
                .code_at(unix_now())
                .map_err(|e| post.fail(format!("cannot compute the code: {e}")))?;
            let mut fields = form.hidden();
            fields.push(("code".to_owned(), code));
            let answer = self.post(&post, origin, &fields).await?;
            decided.second_factor = true;
            if let Some(to) = redirected(&answer) {
                return Ok(to);
            }
            let message = page_message(&answer.body);
            if answer.status == 400 && message.contains("already used") && !retried {
                // Each code works once (RFC 6238 §5.2): wait for the next one.
                retried = true;
                decided.waited_for_next_code = true;
                let wait = totp::secs_to_next_step(unix_now());
                tokio::time::sleep(Duration::from_secs(wait.unsigned_abs() + 1)).await;
                page = answer;
                continue;
            }
            return Err(post.unexpected(&answer, "303"));
        }
    }

    /// `/device/consent`: check it is our request, tick, Approve or Deny.
    async fn consent(
        &self,
        url: &Url,
        origin: &str,
        user_code: &str,
        decision: &PageDecision,
        decided: &mut Decided,
    ) -> Result<Url, PageFailure> {
        let step = Step::new("open the consent page", "GET", url);
        let page = self.get(&step).await?;
        if let Some(to) = redirected(&page) {
            return Ok(to);
        }
        if page.status != 200 {
            return Err(step.unexpected(&page, "200 and the consent form"));
        }
        // Never decide someone else's request: the page names its code.
        let shown = shown_user_code(&page.body);
        if shown.as_deref().map(normalise_code) != Some(normalise_code(user_code)) {
            return Err(step.fail(format!(
                "the consent page is for code {}, not {user_code}",
                shown.as_deref().unwrap_or("(none shown)")
            )));
        }
        let form = forms(&page.body)
            .into_iter()
            .find(|f| !f.checkboxes("scope").is_empty())
            .ok_or_else(|| step.fail("the page shows no consent form with scopes"))?;
        let offered = form.checkboxes("scope");
        let ticked: Vec<String> = match decision {
            PageDecision::Deny => Vec::new(),
            PageDecision::Approve(wanted) if wanted.is_empty() => {
                let pre: Vec<String> = offered
                    .iter()
                    .filter(|(_, checked)| *checked)
                    .map(|(id, _)| id.clone())
                    .collect();
                if pre.is_empty() {
                    return Err(step.fail("the page ticks no scope, and none was given to tick"));
                }
                pre
            }
            PageDecision::Approve(wanted) => {
                if let Some(missing) = wanted
                    .iter()
                    .find(|w| !offered.iter().any(|(id, _)| id == *w))
                {
                    let ids: Vec<&str> = offered.iter().map(|(id, _)| id.as_str()).collect();
                    return Err(step.fail(format!(
                        "the page does not offer the scope {missing} (it offers {})",
                        ids.join(", ")
                    )));
                }
                wanted.clone()
            }
        };
        let action = form.action_url(&page.url).map_err(|e| step.fail(e))?;
        let (name, button) = match decision {
            PageDecision::Deny => ("deny", "deny"),
            PageDecision::Approve(_) => ("approve", "approve"),
        };
        let step = Step::new(name, "POST", &action);
        let mut fields = form.hidden();
        fields.extend(ticked.iter().map(|s| ("scope".to_owned(), s.clone())));
        fields.push(("action".to_owned(), button.to_owned()));
        let page = self.post(&step, origin, &fields).await?;
        decided.scopes = ticked;
        redirected(&page).ok_or_else(|| step.unexpected(&page, "303"))
    }

    /// `/device/done`: the page says what was decided.
    async fn done(&self, url: &Url, decision: &PageDecision) -> Result<(), PageFailure> {
        let step = Step::new("open the done page", "GET", url);
        let page = self.get(&step).await?;
        if page.status != 200 {
            return Err(step.unexpected(&page, "200"));
        }
        let text = text_of(&page.body);
        let (says, wanted) = match decision {
            PageDecision::Approve(_) => (text.contains("You allowed"), "that access was allowed"),
            PageDecision::Deny => (
                text.contains("You declined"),
                "that the request was declined",
            ),
        };
        if says {
            Ok(())
        } else {
            Err(step.fail(format!(
                "the page does not say {wanted}: {}",
                page_message(&page.body)
            )))
        }
    }

    async fn get(&self, step: &Step) -> Result<Page, PageFailure> {
        let res = self.client.get(step.url.clone()).send().await;
        read(step, res).await
    }

    async fn post(
        &self,
        step: &Step,
        origin: &str,
        fields: &[(String, String)],
    ) -> Result<Page, PageFailure> {
        let res = self
            .client
            .post(step.url.clone())
            .header("origin", origin)
            .form(fields)
            .send()
            .await;
        read(step, res).await
    }
}

/// Reads a response; transport errors name the step (and never the form).
async fn read(step: &Step, res: reqwest::Result<reqwest::Response>) -> Result<Page, PageFailure> {
    let res = res.map_err(|e| step.fail(format!("request failed: {}", e.without_url())))?;
    let status = res.status().as_u16();
    let url = res.url().clone();
    let location = res
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .and_then(|l| url.join(l).ok());
    let body = res
        .text()
        .await
        .map_err(|e| step.fail(format!("reading the page failed: {}", e.without_url())))?;
    Ok(Page {
        status,
        url,
        location,
        body,
    })
}

/// The target of a `303 See Other` (pactd's pages redirect with 303 only).
fn redirected(page: &Page) -> Option<Url> {
    page.location.clone().filter(|_| page.status == 303)
}

fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Letters and digits, upper case: `bcdf-ghjk` and `BCDFGHJK` are one code.
fn normalise_code(code: &str) -> String {
    code.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// The code the consent page names ("… with code BCDF-GHJK.").
fn shown_user_code(html: &str) -> Option<String> {
    let text = text_of(html);
    let at = text.find("with code ")? + "with code ".len();
    let code: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!code.is_empty()).then_some(code)
}

// ---------------------------------------------------------------------------
// Just enough HTML: tags, forms, visible text
// ---------------------------------------------------------------------------

/// A start tag (`name`) or an end tag (`/name`), with its attributes
/// (names lower-cased, values unescaped, `""` for a bare attribute).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tag {
    name: String,
    attrs: Vec<(String, String)>,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every tag of a page, in order (comments skipped).
fn tags(html: &str) -> Vec<Tag> {
    let bytes = html.as_bytes();
    let len = bytes.len();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = html[i..].find('<') {
        let start = i + off + 1;
        if html[start..].starts_with("!--") {
            match html[start..].find("-->") {
                Some(end) => {
                    i = start + end + 3;
                    continue;
                }
                None => break,
            }
        }
        let closing = bytes.get(start) == Some(&b'/');
        let name_start = start + usize::from(closing);
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if name_len == 0 {
            i = start;
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let mut j = name_start + name_len;
        let mut attrs = Vec::new();
        while j < len {
            let b = bytes[j];
            if b == b'>' {
                j += 1;
                break;
            }
            if b.is_ascii_whitespace() || b == b'/' {
                j += 1;
                continue;
            }
            let an_len = bytes[j..]
                .iter()
                .take_while(|b| !b.is_ascii_whitespace() && !matches!(b, b'=' | b'>' | b'/'))
                .count();
            if an_len == 0 {
                j += 1;
                continue;
            }
            let attr = html[j..j + an_len].to_ascii_lowercase();
            j += an_len;
            while j < len && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let mut value = String::new();
            if j < len && bytes[j] == b'=' {
                j += 1;
                while j < len && bytes[j].is_ascii_whitespace() {
                    j += 1;
                }
                match bytes.get(j) {
                    Some(&q) if q == b'"' || q == b'\'' => {
                        let end = bytes[j + 1..]
                            .iter()
                            .position(|&b| b == q)
                            .map_or(len, |p| j + 1 + p);
                        value = unescape(&html[j + 1..end]);
                        j = (end + 1).min(len);
                    }
                    _ => {
                        let vlen = bytes[j..]
                            .iter()
                            .take_while(|b| !b.is_ascii_whitespace() && **b != b'>')
                            .count();
                        value = unescape(&html[j..j + vlen]);
                        j += vlen;
                    }
                }
            }
            attrs.push((attr, value));
        }
        out.push(Tag {
            name: if closing { format!("/{name}") } else { name },
            attrs,
        });
        i = j.min(len);
    }
    out
}

/// A `<form>` and its `<input>`s.
#[derive(Clone, Debug)]
struct Form {
    action: String,
    inputs: Vec<Tag>,
}

impl Form {
    fn has_input(&self, name: &str) -> bool {
        self.inputs.iter().any(|t| t.attr("name") == Some(name))
    }

    /// The hidden fields, as a browser submits them.
    fn hidden(&self) -> Vec<(String, String)> {
        self.inputs
            .iter()
            .filter(|t| {
                t.attr("type")
                    .is_some_and(|v| v.eq_ignore_ascii_case("hidden"))
            })
            .filter_map(|t| {
                let name = t.attr("name")?;
                Some((name.to_owned(), t.attr("value").unwrap_or("").to_owned()))
            })
            .collect()
    }

    /// `(value, checked)` of each checkbox named `name`.
    fn checkboxes(&self, name: &str) -> Vec<(String, bool)> {
        self.inputs
            .iter()
            .filter(|t| {
                t.attr("type")
                    .is_some_and(|v| v.eq_ignore_ascii_case("checkbox"))
            })
            .filter(|t| t.attr("name") == Some(name))
            .map(|t| {
                (
                    t.attr("value").unwrap_or("on").to_owned(),
                    t.attr("checked").is_some(),
                )
            })
            .collect()
    }

    /// The action resolved against the page (a missing action is the page itself).
    fn action_url(&self, page: &Url) -> Result<Url, String> {
        page.join(&self.action)
            .map_err(|e| format!("the form's action {:?} is not a URL: {e}", self.action))
    }
}

/// Every form of a page.
fn forms(html: &str) -> Vec<Form> {
    let mut out = Vec::new();
    let mut current: Option<Form> = None;
    for tag in tags(html) {
        match tag.name.as_str() {
            "form" => {
                out.extend(current.take());
                current = Some(Form {
                    action: tag.attr("action").unwrap_or("").to_owned(),
                    inputs: Vec::new(),
                });
            }
            "/form" => out.extend(current.take()),
            "input" => {
                if let Some(f) = current.as_mut() {
                    f.inputs.push(tag);
                }
            }
            _ => {}
        }
    }
    out.extend(current);
    out
}

/// HTML character references: the named ones askama writes, and numeric ones.
fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest
            .char_indices()
            .take(12)
            .find(|(_, c)| *c == ';')
            .map(|(i, _)| i);
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => match entity.strip_prefix('#') {
                    Some(hex) if hex.starts_with(['x', 'X']) => u32::from_str_radix(&hex[1..], 16)
                        .ok()
                        .and_then(char::from_u32),
                    Some(dec) => dec.parse().ok().and_then(char::from_u32),
                    None => None,
                },
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text a person reads: tags dropped (a heading ends with ": "),
/// references decoded, whitespace collapsed.
fn text_of(html: &str) -> String {
    let mut raw = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        raw.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('>') else {
            rest = "";
            break;
        };
        let tag = rest[at + 1..at + end].trim().to_ascii_lowercase();
        if matches!(tag.as_str(), "/h1" | "/h2" | "/h3")
            && !raw.trim_end().ends_with(['.', '?', '!', ':'])
        {
            raw.push(':');
        }
        raw.push(' ');
        rest = &rest[at + end + 1..];
    }
    raw.push_str(rest);
    unescape(&raw)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" :", ":")
        .trim_end_matches(':')
        .to_owned()
}

/// `html` without its `<a …>…</a>` elements (links are navigation, not news).
fn without_links(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find("<a ") {
        out.push_str(&rest[..at]);
        match rest[at..].find("</a>") {
            Some(end) => rest = &rest[at + end + 4..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the page tells the person: its `role="alert"` element (an error
/// message, or an error page's title and message), else its heading, else
/// its text; clipped.
fn page_message(html: &str) -> String {
    let main = match (html.find("<main"), html.find("</main>")) {
        (Some(a), Some(b)) if a < b => &html[a..b],
        _ => html,
    };
    let mut message = String::new();
    if let Some(at) = main.find("role=\"alert\"")
        && let Some(open) = main[..at].rfind('<')
    {
        let name: String = main[open + 1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if let Some(gt) = main[at..].find('>') {
            let inner = at + gt + 1;
            let end = main[inner..]
                .find(&format!("</{name}>"))
                .map_or(main.len(), |e| inner + e);
            message = text_of(&without_links(&main[inner..end]));
        }
    }
    if message.is_empty()
        && let (Some(a), Some(b)) = (main.find("<h1"), main.find("</h1>"))
        && a < b
    {
        message = text_of(&main[a..b]);
    }
    if message.is_empty() {
        message = text_of(main);
    }
    if message.is_empty() {
        return "(an empty page)".to_owned();
    }
    if message.chars().count() > MAX_MESSAGE {
        message = message.chars().take(MAX_MESSAGE).collect::<String>() + "…";
    }
    format!("\"{message}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSENT: &str = r#"<!doctype html><html><body><main id="main">
<section class="card">
  <h1>Allow Agent to act for you at Demo &amp; Co?</h1>
  <p class="muted">Asked just now (2025-01-01 00:00:00 UTC) from 127.0.0.1, with code BCDF-GHJK.</p>
  <form method="post" action="/device/consent">
    <input type="hidden" name="csrf" value="tok&#34;en">
    <ul class="scopes">
      <li><label><input type="checkbox" name="scope" value="orders:read" checked>
        <span>See &lt;b&gt;your&lt;/b&gt; orders</span></label></li>
      <li><label><input type="checkbox" name="scope" value="orders:cancel">
        <span>Cancel orders</span></label></li>
    </ul>
    <button type="submit" name="action" value="approve">Approve</button>
  </form>
</section></main></body></html>"#;

    #[test]
    fn forms_give_hidden_fields_and_checkboxes() {
        let forms = forms(CONSENT);
        assert_eq!(forms.len(), 1);
        let f = &forms[0];
        assert_eq!(f.action, "/device/consent");
        assert_eq!(f.hidden(), vec![("csrf".to_owned(), "tok\"en".to_owned())]);
        assert_eq!(
            f.checkboxes("scope"),
            vec![
                ("orders:read".to_owned(), true),
                ("orders:cancel".to_owned(), false)
            ]
        );
        let page = Url::parse("http://127.0.0.1:8080/device/consent?scopes=x").unwrap();
        assert_eq!(
            f.action_url(&page).unwrap().as_str(),
            "http://127.0.0.1:8080/device/consent"
        );
        assert_eq!(shown_user_code(CONSENT).as_deref(), Some("BCDF-GHJK"));
        assert_eq!(normalise_code("bcdf ghjk"), "BCDFGHJK");
    }

    #[test]
    fn tags_read_quoted_unquoted_and_bare_attributes() {
        let t = tags(
            r#"<!-- <input name="no"> --><INPUT Type=hidden name='a' value="1 > 2" required/></form>"#,
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "input");
        assert_eq!(t[0].attr("type"), Some("hidden"));
        assert_eq!(t[0].attr("name"), Some("a"));
        assert_eq!(t[0].attr("value"), Some("1 > 2"));
        assert_eq!(t[0].attr("required"), Some(""));
        assert_eq!(t[1].name, "/form");
        // Unterminated input does not panic.
        assert_eq!(tags("<input name=\"x").len(), 1);
        assert!(tags("a < b <").is_empty());
    }

    #[test]
    fn references_are_decoded() {
        assert_eq!(
            unescape("a &amp; b &lt;c&gt; &#34;d&#39; &#x27;e&#X27; &bogus; & ü"),
            "a & b <c> \"d' 'e' &bogus; & ü"
        );
    }

    #[test]
    fn page_messages_quote_what_the_person_sees() {
        let login = r#"<main><section class="card"><h1>Sign in to Demo</h1>
<p class="error" role="alert">That email and password don&#39;t match an account here.</p>
<form method="post" action="/login"></form></section></main>"#;
        assert_eq!(
            page_message(login),
            "\"That email and password don't match an account here.\""
        );
        let error = r#"<header>pactd</header><main id="main"><section class="card" role="alert">
  <h1>This code has expired</h1>
  <p>Codes are valid for a few minutes only.</p>
  <p><a class="button secondary" href="/device">Enter a code</a></p>
</section></main><footer>Secured by pactd</footer>"#;
        assert_eq!(
            page_message(error),
            "\"This code has expired: Codes are valid for a few minutes only.\""
        );
        assert_eq!(
            page_message("<main><h1>Done</h1><p>x</p></main>"),
            "\"Done\""
        );
        assert_eq!(
            page_message("Something went wrong."),
            "\"Something went wrong.\""
        );
        assert_eq!(page_message(""), "(an empty page)");
        let long = "x".repeat(2 * MAX_MESSAGE);
        assert!(page_message(&long).ends_with("…\""));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let a = LoginAccount::new(
            "ann@example.com",
            "correct horse",
            Some(TotpSecret::from_bytes(b"12345678901234567890".to_vec())),
        );
        let shown = format!("{a:?}");
        assert!(shown.contains("ann@example.com"));
        assert!(!shown.contains("correct horse"));
        assert!(!shown.contains("1234"));
    }
}
