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
use scraper::{ElementRef, Html};
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
        let client = pact_jose::with_shared_tls(Client::builder())
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

#[allow(clippy::disallowed_methods)] // the personal agent's own wall clock
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
// Reading the pages: forms and visible text, from the HTML parser's tree
// ---------------------------------------------------------------------------

/// A page parsed as a browser parses it (the HTML Living Standard's
/// tree construction, through `scraper`), so character references, quoting
/// and implied end tags are whatever a browser would make of them.
fn parse(html: &str) -> Html {
    Html::parse_document(html)
}

/// The elements below `root` (and `root` itself) named `name`, in document order.
fn elements<'a>(root: ElementRef<'a>, name: &'a str) -> impl Iterator<Item = ElementRef<'a>> + 'a {
    root.descendent_elements()
        .filter(move |e| e.value().name() == name)
}

/// An `<input>` of a form: its attributes, as the parser decoded them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Input {
    attrs: Vec<(String, String)>,
}

impl Input {
    fn of(e: ElementRef<'_>) -> Self {
        Self {
            attrs: e
                .value()
                .attrs()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn is_type(&self, kind: &str) -> bool {
        self.attr("type")
            .is_some_and(|v| v.eq_ignore_ascii_case(kind))
    }
}

/// A `<form>` and its `<input>`s.
#[derive(Clone, Debug)]
struct Form {
    action: String,
    inputs: Vec<Input>,
}

impl Form {
    fn has_input(&self, name: &str) -> bool {
        self.inputs.iter().any(|t| t.attr("name") == Some(name))
    }

    /// The hidden fields, as a browser submits them.
    fn hidden(&self) -> Vec<(String, String)> {
        self.inputs
            .iter()
            .filter(|t| t.is_type("hidden"))
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
            .filter(|t| t.is_type("checkbox"))
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
    let doc = parse(html);
    elements(doc.root_element(), "form")
        .map(|form| Form {
            action: form.value().attr("action").unwrap_or("").to_owned(),
            inputs: elements(form, "input").map(Input::of).collect(),
        })
        .collect()
}

/// Which links [`visible_text`] keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Links {
    Keep,
    /// Links are navigation, not news: left out of a page's message.
    Drop,
}

/// The text a person reads in `root`: element boundaries are spaces, a
/// heading ends with ": " unless it ends a sentence, whitespace collapsed.
fn visible_text(root: ElementRef<'_>, links: Links) -> String {
    fn walk(e: ElementRef<'_>, links: Links, out: &mut String) {
        let name = e.value().name();
        if links == Links::Drop && name == "a" {
            return;
        }
        out.push(' ');
        for child in e.children() {
            if let Some(text) = child.value().as_text() {
                out.push_str(text);
            } else if let Some(element) = ElementRef::wrap(child) {
                walk(element, links, out);
            }
        }
        if matches!(name, "h1" | "h2" | "h3") && !out.trim_end().ends_with(['.', '?', '!', ':']) {
            out.push(':');
        }
        out.push(' ');
    }
    let mut raw = String::new();
    walk(root, links, &mut raw);
    raw.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" :", ":")
        .trim_end_matches(':')
        .to_owned()
}

/// The text of a whole page.
fn text_of(html: &str) -> String {
    visible_text(parse(html).root_element(), Links::Keep)
}

/// What the page tells the person: its `role="alert"` element (an error
/// message, or an error page's title and message), else its heading, else
/// its text; clipped.
fn page_message(html: &str) -> String {
    let doc = parse(html);
    let root = doc.root_element();
    let main = elements(root, "main").next().unwrap_or(root);
    let alert = main
        .descendent_elements()
        .find(|e| e.value().attr("role") == Some("alert"));
    let mut message = alert.map_or_else(String::new, |a| visible_text(a, Links::Drop));
    if message.is_empty()
        && let Some(h1) = elements(main, "h1").next()
    {
        message = visible_text(h1, Links::Keep);
    }
    if message.is_empty() {
        message = visible_text(main, Links::Keep);
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
    fn inputs_read_quoted_unquoted_and_bare_attributes() {
        let f = forms(
            r#"<form action=/x><!-- <input type="hidden" name="no"> --><INPUT Type=hidden name='a' value="1 > 2" required/><input type=checkbox name=s value=v CHECKED></form>"#,
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].action, "/x");
        assert_eq!(f[0].hidden(), vec![("a".to_owned(), "1 > 2".to_owned())]);
        assert_eq!(f[0].inputs[0].attr("required"), Some(""));
        assert_eq!(f[0].checkboxes("s"), vec![("v".to_owned(), true)]);
        // Broken markup does not panic, and yields what a browser would.
        assert_eq!(forms("<form><input name=\"x").len(), 1);
        assert!(forms("a < b <").is_empty());
    }

    #[test]
    fn references_are_decoded() {
        assert_eq!(
            text_of("<p>a &amp; b &lt;c&gt; &#34;d&#39; &#x27;e&#X27; &bogus; & ü</p>"),
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

    /// Pages as a pactd dev server served them, one device authorization
    /// approved and one denied (testdata/pactd-pages; their CSRF tokens and
    /// ids are from that throwaway server).
    mod real_pages {
        use super::*;

        const CODE_ENTRY: &str = include_str!("../testdata/pactd-pages/code-entry.html");
        const SIGN_IN: &str = include_str!("../testdata/pactd-pages/sign-in.html");
        const CONSENT: &str = include_str!("../testdata/pactd-pages/consent.html");
        const DONE_ALLOWED: &str = include_str!("../testdata/pactd-pages/done-allowed.html");
        const DONE_DECLINED: &str = include_str!("../testdata/pactd-pages/done-declined.html");
        const CODE_USED: &str = include_str!("../testdata/pactd-pages/code-used.html");

        fn form_with(html: &str, field: &str) -> Form {
            forms(html)
                .into_iter()
                .find(|f| f.has_input(field))
                .unwrap()
        }

        #[test]
        fn the_code_entry_form_carries_the_code_and_the_csrf_token() {
            let f = form_with(CODE_ENTRY, "user_code");
            assert_eq!(f.action, "/device");
            assert_eq!(
                f.hidden(),
                vec![(
                    "csrf".to_owned(),
                    "KRwk9J4vchzNBiiHF2SylbzJWC8nKb_cANKpaFPl0Zs".to_owned()
                )]
            );
            let code = f
                .inputs
                .iter()
                .find(|i| i.attr("name") == Some("user_code"));
            assert_eq!(code.and_then(|i| i.attr("value")), Some("JNMJ-QCKP"));
            assert_eq!(page_message(CODE_ENTRY), "\"Connect your agent\"");
        }

        #[test]
        fn the_sign_in_form_is_found_beside_the_hidden_passkey_section() {
            let f = forms(SIGN_IN)
                .into_iter()
                .find(|f| f.has_input("email") && f.has_input("password"))
                .unwrap();
            assert_eq!(f.action, "/login");
            let names: Vec<String> = f.hidden().into_iter().map(|(k, _)| k).collect();
            assert_eq!(names, ["csrf", "brand", "next"]);
            assert!(
                f.hidden()
                    .contains(&("next".to_owned(), "/device/consent".to_owned()))
            );
            // The passkey section's status line is role="status", not an
            // alert: the message is the heading.
            assert_eq!(page_message(SIGN_IN), "\"Sign in to Demo Store\"");
        }

        #[test]
        fn the_consent_form_is_the_one_with_scopes_not_the_sign_out_form() {
            let all = forms(CONSENT);
            assert_eq!(all.len(), 2);
            assert_eq!(all[0].action, "/device/not-you");
            assert!(all[0].checkboxes("scope").is_empty());
            let f = &all[1];
            assert_eq!(f.action, "/device/consent");
            assert_eq!(
                f.checkboxes("scope"),
                vec![
                    ("orders:cancel".to_owned(), true),
                    ("orders:read".to_owned(), true)
                ]
            );
            let names: Vec<String> = f.hidden().into_iter().map(|(k, _)| k).collect();
            assert_eq!(names, ["csrf", "authorization"]);
            assert_eq!(shown_user_code(CONSENT).as_deref(), Some("JNMJ-QCKP"));
        }

        #[test]
        fn the_done_pages_say_what_was_decided() {
            assert!(text_of(DONE_ALLOWED).contains("You allowed Capture Agent to act for you"));
            assert!(!text_of(DONE_ALLOWED).contains("You declined"));
            assert!(text_of(DONE_DECLINED).contains("You declined."));
            assert!(!text_of(DONE_DECLINED).contains("You allowed"));
        }

        #[test]
        fn an_error_page_is_quoted_without_its_navigation() {
            assert_eq!(
                page_message(CODE_USED),
                "\"This code has already been used: This request has already been answered, so \
                 there is nothing more to do with this code. If your agent still needs your \
                 permission, ask it for a new code.\""
            );
        }
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
