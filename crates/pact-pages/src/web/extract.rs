//! What every form POST of the customers' pages begins with, written once as
//! extractors (the console's are in admin/console/extract.rs): the browser's
//! cookies looked up, the Origin checked, the body read, the CSRF token
//! checked against the session's (or, for the forms anonymous visitors may
//! send, against the form-token cookie), and only then the form read as the
//! handler's own type. A handler that takes one of these cannot forget a
//! step or take them in another order (web/security.rs holds the rules).
//!
//! The Origin is judged with the request's head and refused once the body
//! is read, as the handlers did when they read the body themselves: a body
//! too large is axum's own 413 either way.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use pact_db::sessions::Session;
use serde::de::DeserializeOwned;

use super::form::Fields;
use super::page::PageError;
use super::security::{check_csrf, check_origin};
use super::session::{Browser, FormToken, check_form_token};
use crate::state::AppState;

/// How a form's fields become the handler's type: a struct of
/// `Option<String>` fields read by name ([`Fields::decode`]), or the
/// [`Fields`] themselves for a form with repeated fields (consent's
/// checkboxes).
pub trait FormFields: Sized {
    fn from_fields(fields: Fields) -> Result<Self, PageError>;
}

impl FormFields for Fields {
    fn from_fields(fields: Fields) -> Result<Self, PageError> {
        Ok(fields)
    }
}

impl<T: DeserializeOwned> FormFields for T {
    fn from_fields(fields: Fields) -> Result<Self, PageError> {
        fields.decode()
    }
}

/// A form that carries nothing but its CSRF token (sign out, delete a
/// passkey, sign out the other browsers).
#[derive(Debug, serde::Deserialize)]
pub struct NoFields {}

/// The head and body of a page's POST, the Origin judged and the fields
/// parsed; the CSRF token is checked by the caller, which knows against
/// what.
async fn read(req: Request, state: &AppState) -> Result<(Browser, Fields), Response> {
    let (mut parts, body) = req.into_parts();
    let browser = Browser::from_request_parts(&mut parts, state)
        .await
        .map_err(IntoResponse::into_response)?;
    let origin = check_origin(&parts.headers, &state.config.public_url);
    let body = Bytes::from_request(Request::from_parts(parts, body), state)
        .await
        .map_err(IntoResponse::into_response)?;
    origin.map_err(IntoResponse::into_response)?;
    Ok((browser, Fields::parse(&body)))
}

/// A form posted from one of our pages by a browser with a live session:
/// same origin, the session's CSRF token. No session means no token, so the
/// request is refused like a wrong token.
pub struct SessionForm<T> {
    pub browser: Browser,
    /// The browser's session (the one the token was checked against).
    pub session: Session,
    pub form: T,
}

impl<T: FormFields> FromRequest<AppState> for SessionForm<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (browser, fields) = read(req, state).await?;
        Self::checked(browser, fields).map_err(IntoResponse::into_response)
    }
}

impl<T: FormFields> SessionForm<T> {
    fn checked(browser: Browser, fields: Fields) -> Result<Self, PageError> {
        let Some(session) = browser.session.clone() else {
            return Err(PageError::Forbidden(super::i18n::t("err-session-changed")));
        };
        check_csrf(&session.csrf_token, fields.get("csrf"))?;
        Ok(Self {
            form: T::from_fields(fields)?,
            browser,
            session,
        })
    }
}

/// Who posted a form that anonymous visitors may post too (code entry,
/// sign-in, a forgotten password): a live session, or a browser with only
/// its form token.
#[derive(Debug)]
pub enum Visitor {
    Session(Box<Session>),
    Anonymous(FormToken),
}

impl Visitor {
    pub fn session(&self) -> Option<&Session> {
        match self {
            Self::Session(s) => Some(s),
            Self::Anonymous(_) => None,
        }
    }

    /// The CSRF token the form was checked against (to render it again).
    pub fn csrf(&self) -> &str {
        match self {
            Self::Session(s) => &s.csrf_token,
            Self::Anonymous(t) => t.as_str(),
        }
    }
}

/// [`SessionForm`] for the forms an anonymous visitor may send: the CSRF
/// token against the session's or, without a session, against the
/// form-token cookie (web/session.rs, a `__Host-` cookie on HTTPS).
pub struct VisitorForm<T> {
    pub browser: Browser,
    pub visitor: Visitor,
    pub form: T,
}

impl<T: FormFields> FromRequest<AppState> for VisitorForm<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (browser, fields) = read(req, state).await?;
        Self::checked(browser, fields).map_err(IntoResponse::into_response)
    }
}

impl<T: FormFields> VisitorForm<T> {
    fn checked(browser: Browser, fields: Fields) -> Result<Self, PageError> {
        let visitor = match &browser.session {
            Some(s) => {
                check_csrf(&s.csrf_token, fields.get("csrf"))?;
                Visitor::Session(Box::new(s.clone()))
            }
            None => Visitor::Anonymous(check_form_token(&browser, fields.get("csrf"))?),
        };
        Ok(Self {
            form: T::from_fields(fields)?,
            browser,
            visitor,
        })
    }
}
