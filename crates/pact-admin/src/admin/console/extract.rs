//! What every console request begins with, written once as extractors: the
//! staff member signed in (or sent to the sign-in page), and a form whose
//! Origin and CSRF token were checked before anything in it is read
//! (web/security.rs's rules, the same as the customers' pages).
//!
//! The checks keep the order the handlers used to spell out: the session is
//! looked up with the request's head, then the Origin, the form and its CSRF
//! token, and only then whether the session is signed in, so a forged POST
//! is refused the same way whether or not its victim is signed in.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::session::{SignedIn, Staff};
use crate::state::AppState;
use crate::web::PageError;
use crate::web::form::Fields;
use crate::web::login::see_other;
use crate::web::security::{check_csrf, check_origin};

/// Why a console request went no further.
pub enum Refused {
    /// Not signed in (or no longer): to the sign-in page.
    SignIn,
    /// The body could not be read (too large, cut off): axum's own answer.
    Body(Response),
    Page(PageError),
}

impl From<PageError> for Refused {
    fn from(e: PageError) -> Self {
        Self::Page(e)
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn => see_other("/admin/sign-in", None),
            Self::Body(res) => res,
            Self::Page(e) => e.into_response(),
        }
    }
}

async fn signed_in(staff: &Staff, state: &AppState) -> Result<SignedIn, Refused> {
    staff.signed_in(state).await?.ok_or(Refused::SignIn)
}

/// A page of a signed-in admin: who is looking, and from where.
pub struct Viewer {
    pub staff: Staff,
    pub who: SignedIn,
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Refused> {
        let staff = Staff::from_request_parts(parts, state).await?;
        let who = signed_in(&staff, state).await?;
        crate::admin::StaffRequest::proven(&parts.extensions);
        Ok(Self { staff, who })
    }
}

/// A console form that passed the Origin check and carries the session's
/// CSRF token; the session may still be half signed in (the second-factor
/// and sign-out forms).
pub struct CheckedForm {
    pub staff: Staff,
    pub fields: Fields,
}

impl FromRequest<AppState> for CheckedForm {
    type Rejection = Refused;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Refused> {
        let (mut parts, body) = req.into_parts();
        let staff = Staff::from_request_parts(&mut parts, state).await?;
        // Judged now, refused after the body is read, as before.
        let origin = check_origin(&parts.headers, &state.config.public_url);
        let body = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| Refused::Body(e.into_response()))?;
        origin?;
        let fields = Fields::parse(&body);
        let Some(session) = &staff.session else {
            return Err(
                PageError::Forbidden("Your session has ended. Sign in again.".into()).into(),
            );
        };
        check_csrf(&session.csrf_token, fields.get("csrf"))?;
        Ok(Self { staff, fields })
    }
}

/// A checked console form of a signed-in admin.
pub struct StaffForm {
    pub staff: Staff,
    pub who: SignedIn,
    pub fields: Fields,
}

impl FromRequest<AppState> for StaffForm {
    type Rejection = Refused;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Refused> {
        let mark = req
            .extensions()
            .get::<crate::admin::StaffRequest>()
            .cloned();
        let CheckedForm { staff, fields } = CheckedForm::from_request(req, state).await?;
        let who = signed_in(&staff, state).await?;
        if let Some(mark) = mark {
            mark.set();
        }
        Ok(Self { staff, who, fields })
    }
}
