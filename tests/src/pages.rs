//! Driving pactd's browser pages the way a browser does: a client that keeps
//! cookies and sends the `Origin` header browsers send on POST, CSRF tokens
//! read from the forms, and built-in accounts created straight in the
//! database. Shared by every page test (sign-in, device/consent, account).
//!
//! ```ignore
//! let b = Browser::new(&app);
//! let user = add_user(&app, "demo", "ann@example.com", "correct horse").await;
//! let res = b.sign_in("demo", "ann@example.com", "correct horse", "/account").await;
//! assert_eq!(location(&res), "/account");
//! ```

use std::sync::Arc;

use pact_db::users::User;
use reqwest::cookie::{CookieStore, Jar};
use reqwest::{Client, Response};

use crate::TestApp;

/// A browser: a cookie jar, no automatic redirects (tests look at each
/// `Location`), and the app's public origin for `Origin` headers.
pub struct Browser {
    pub client: Client,
    pub jar: Arc<Jar>,
    pub base_url: String,
    /// Sent as `Origin` on every POST, as a browser sends its page's origin.
    pub origin: String,
    /// The app's database, to read this browser's session (CSRF token).
    pub db: sqlx::PgPool,
}

impl Browser {
    pub fn new(app: &TestApp) -> Self {
        Self::with(app, reqwest::header::HeaderMap::new())
    }

    /// A browser at `address`, as a trusted proxy on loopback names it
    /// (`X-Forwarded-For`): the app must trust 127.0.0.1.
    pub fn from_address(app: &TestApp, address: &str) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-forwarded-for", address.parse().unwrap());
        Self::with(app, headers)
    }

    fn with(app: &TestApp, headers: reqwest::header::HeaderMap) -> Self {
        let jar = Arc::new(Jar::default());
        let client = pact_jose::with_shared_tls(Client::builder())
            .cookie_provider(jar.clone())
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .unwrap();
        Self {
            client,
            jar,
            base_url: app.base_url.clone(),
            origin: pact_server::web::security::origin_of(&app.state.config.public_url),
            db: app.db.clone(),
        }
    }

    /// An absolute URL for a path on the app.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// GET, returning the status and the body.
    pub async fn get_html(&self, path: &str) -> (u16, String) {
        let res = self.get(path).await;
        let status = res.status().as_u16();
        (status, res.text().await.unwrap())
    }

    /// POSTs a form with this browser's `Origin`.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Response {
        self.client
            .post(self.url(path))
            .header("origin", &self.origin)
            .form(form)
            .send()
            .await
            .unwrap()
    }

    /// POST, returning the status and the body.
    pub async fn post_html(&self, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let res = self.post(path, form).await;
        let status = res.status().as_u16();
        (status, res.text().await.unwrap())
    }

    /// GETs `page` (which must show a form), reads its CSRF token, and POSTs
    /// `form` plus that token to `action`.
    pub async fn submit(&self, page: &str, action: &str, form: &[(&str, &str)]) -> Response {
        let (status, html) = self.get_html(page).await;
        let csrf = csrf_from(&html)
            .unwrap_or_else(|| panic!("GET {page} ({status}) shows no CSRF token:\n{html}"));
        let mut fields = form.to_vec();
        fields.push(("csrf", &csrf));
        // Like a browser, send the form's other hidden fields too (consent names its request).
        let authorization = hidden_field(&html, "authorization");
        if let Some(a) = &authorization
            && !form.iter().any(|(k, _)| *k == "authorization")
        {
            fields.push(("authorization", a));
        }
        self.post(action, &fields).await
    }

    /// Signs in with email and password through `/login?brand=…&next=…`;
    /// returns the POST's response (a 303 on success).
    pub async fn sign_in(&self, brand: &str, email: &str, password: &str, next: &str) -> Response {
        let page = format!("/login?brand={brand}&next={}", enc(next));
        self.submit(
            &page,
            "/login",
            &[
                ("brand", brand),
                ("next", next),
                ("email", email),
                ("password", password),
            ],
        )
        .await
    }

    /// Enters a code on `/login/second-factor` (`field` is `code` for TOTP or
    /// `recovery_code`).
    pub async fn second_factor(&self, field: &str, code: &str, next: &str) -> Response {
        let page = format!("/login/second-factor?next={}", enc(next));
        self.submit(
            &page,
            "/login/second-factor",
            &[(field, code), ("next", next)],
        )
        .await
    }

    /// The CSRF token of this browser's session, read from the database (for
    /// POSTs whose page is not the point of the test).
    pub async fn csrf_token(&self) -> String {
        let cookie = self.session_cookie().expect("a session cookie");
        pact_db::sessions::find_live(
            &self.db,
            &pact_server::domain::secrets::hash(&cookie),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap()
        .expect("a live session")
        .csrf_token
    }

    /// POSTs `form` plus the session's CSRF token.
    pub async fn post_with_csrf(&self, path: &str, form: &[(&str, &str)]) -> Response {
        let csrf = self.csrf_token().await;
        let mut fields = form.to_vec();
        fields.push(("csrf", &csrf));
        self.post(path, &fields).await
    }

    /// `POST /logout`; asserts the redirect.
    pub async fn sign_out(&self) -> Response {
        let res = self.post_with_csrf("/logout", &[]).await;
        assert_eq!(res.status(), 303, "sign-out");
        res
    }

    /// The session cookie's value, if the jar holds one (plain-http apps only:
    /// with an https public URL the cookie is `Secure` and `__Host-`).
    pub fn session_cookie(&self) -> Option<String> {
        let url = reqwest::Url::parse(&self.base_url).unwrap();
        let header = self.jar.cookies(&url)?;
        header
            .to_str()
            .unwrap()
            .split(';')
            .filter_map(|p| p.trim().split_once('='))
            .find(|(k, _)| *k == "pactd_session")
            .map(|(_, v)| v.to_owned())
    }
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The value of the first `name="csrf"` hidden field in a page.
pub fn csrf_from(html: &str) -> Option<String> {
    hidden_field(html, "csrf")
}

/// The value of the first `<input … name="NAME" value="…">` in a page (as
/// written; values here are tokens, paths or base64url, with nothing escaped).
pub fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!(r#"name="{name}" value=""#);
    let at = html.find(&marker)?;
    let rest = &html[at + marker.len()..];
    rest.find('"').map(|end| rest[..end].to_owned())
}

/// The page with its CSRF token replaced by `CSRF` wherever it appears
/// (hidden fields, data attributes), for comparing pages.
pub fn without_csrf(html: &str) -> String {
    match csrf_from(html) {
        Some(token) if !token.is_empty() => html.replace(&token, "CSRF"),
        _ => html.to_owned(),
    }
}

/// The `Location` of a redirect (panics when there is none).
pub fn location(res: &Response) -> String {
    res.headers()
        .get("location")
        .unwrap_or_else(|| panic!("no Location on a {} response", res.status()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The `Set-Cookie` header, if any.
pub fn set_cookie(res: &Response) -> Option<String> {
    res.headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// A built-in account with this password (hashed as pactd hashes it).
pub async fn add_user(app: &TestApp, brand: &str, email: &str, password: &str) -> User {
    let hash = pact_server::accounts::password::hash(password).unwrap();
    pact_db::users::insert(
        &app.db,
        uuid::Uuid::new_v4(),
        &crate::brand_id(brand),
        email,
        None,
        &hash,
    )
    .await
    .unwrap()
}

/// Gives the user an authenticator app (sealed as pactd seals it) and returns its secret.
pub async fn add_totp(app: &TestApp, user: &User) -> Vec<u8> {
    let secret = pact_server::accounts::totp::new_secret().unwrap();
    let sealed = app.master_key.seal(&secret, user.id.as_bytes()).unwrap();
    pact_db::users::set_totp(&app.db, user.id, Some(&sealed))
        .await
        .unwrap();
    secret
}

/// The user as stored now.
pub async fn reload(app: &TestApp, user: &User) -> User {
    pact_db::users::find(&app.db, user.id)
        .await
        .unwrap()
        .unwrap()
}

/// The TOTP code for now.
pub fn totp_now(secret: &[u8]) -> String {
    totp_at(secret, time::OffsetDateTime::now_utc().unix_timestamp())
}

/// The TOTP code for a unix time.
pub fn totp_at(secret: &[u8], unix: i64) -> String {
    pact_server::accounts::totp::code_at(secret, unix).unwrap()
}

/// Sets `brands.settings.mfa_required` for a brand.
pub async fn require_mfa(app: &TestApp, brand: &str, required: bool) {
    pact_db::brands::set_setting(
        &app.db,
        &crate::brand_id(brand),
        "mfa_required",
        &serde_json::Value::Bool(required),
    )
    .await
    .unwrap();
    app.settle().await;
}

/// The authenticator secret shown on `/account/totp` ("Key: <code>ABCD EFGH …</code>").
pub fn secret_from_setup_page(html: &str) -> Vec<u8> {
    let start = html
        .find("Key: <code>")
        .expect("the setup page shows the key")
        + "Key: <code>".len();
    let end = start + html[start..].find("</code>").unwrap();
    base32_decode(&html[start..end].replace(' ', ""))
}

/// RFC 4648 base32 (no padding) to bytes: the server's own decoder.
pub fn base32_decode(s: &str) -> Vec<u8> {
    pact_server::accounts::totp::base32_decode(s).expect("base32")
}

/// The live session a cookie value refers to, read from the database by the
/// value's hash (the only form stored).
pub async fn session_of(app: &TestApp, cookie: &str) -> Option<pact_db::sessions::Session> {
    pact_db::sessions::find_live(
        &app.db,
        &pact_server::domain::secrets::hash(cookie),
        time::OffsetDateTime::now_utc(),
    )
    .await
    .unwrap()
}

/// Moves the node's clock to the start of the next 30-second TOTP step
/// (RFC 6238 §4), so that a test reasoning about steps has a whole step ahead
/// and cannot straddle two. Returns that moment as unix seconds: codes for the
/// node are `totp_at(secret, t)`, not `totp_now`, from then on.
pub fn next_totp_step(app: &TestApp) -> i64 {
    let step =
        std::time::Duration::from_secs(pact_server::accounts::totp::STEP_SECS.unsigned_abs());
    app.clock.advance_to_next_step(step).unix_timestamp()
}

/// Waits, when needed, so that at least `secs` seconds remain in the current
/// 30-second TOTP step of the system clock. Only for a test whose other party
/// (pact-agent's login driver) computes codes from the system clock itself:
/// every test of pactd alone moves the node's clock with [`next_totp_step`].
pub async fn wait_for_totp_step_with(secs: i64) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let left = 30 - now.rem_euclid(30);
    if left < secs {
        tokio::time::sleep(std::time::Duration::from_millis(
            u64::try_from(left * 1000 + 200).unwrap(),
        ))
        .await;
    }
}
