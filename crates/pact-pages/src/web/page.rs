//! Rendering pages and page errors (an HTML error page, never a stack trace).

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Renders a template as an HTML response. Personal pages must not be cached
/// by the browser or any proxy.
pub fn render(template: &impl Template, status: StatusCode) -> Response {
    match template.render() {
        Ok(html) => {
            let mut res = (status, html).into_response();
            let h = res.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
        Err(e) => {
            tracing::error!(error = %e, "template rendering failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                super::i18n::t("err-render"),
            )
                .into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage<'a> {
    pub brand_name: &'a str,
    pub title: &'a str,
    pub message: &'a str,
    pub signed_in: bool,
    /// The brand's logo and accent, when the page is about a known brand.
    pub look: crate::who::Look,
}

/// What a page handler can fail with; each is shown as a calm page.
#[derive(Debug)]
pub enum PageError {
    /// 400, with a message for the person.
    BadRequest(String),
    /// 403: CSRF or Origin failures.
    Forbidden(String),
    NotFound(String),
    /// 429, with how long to wait.
    TooMany {
        retry_after_secs: u64,
        message: String,
    },
    /// 503: the database cannot be reached now.
    Unavailable,
    /// 503: the request ran out of time (`request_timeout.rs`); nothing says
    /// the database is down.
    TimedOut,
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl From<crate::accounts::sign_in::SignInError> for PageError {
    fn from(e: crate::accounts::sign_in::SignInError) -> Self {
        match e {
            crate::accounts::sign_in::SignInError::Db(e) => e.into(),
            worker => Self::internal(worker),
        }
    }
}

impl From<pact_db::Error> for PageError {
    fn from(e: pact_db::Error) -> Self {
        match crate::error::ApiError::from(e) {
            crate::error::ApiError::Unavailable => Self::Unavailable,
            crate::error::ApiError::A2a(_) => Self::BadRequest(super::i18n::t("err-unacceptable")),
            crate::error::ApiError::Internal(cause) => Self::Internal(cause),
            other => Self::Internal(format!("{other:?}").into()),
        }
    }
}

impl PageError {
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }
}

impl IntoResponse for PageError {
    /// The page is in the request's language, and carries the brand's name
    /// and look once the handler had found which brand it is about.
    fn into_response(self) -> Response {
        use super::i18n::t;
        // Only this one tells the health guard the database is gone.
        let db_down = matches!(self, Self::Unavailable);
        let (status, title, message, retry) = match self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, t("err-bad-request"), m, None),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, t("err-forbidden"), m, None),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, t("err-not-found"), m, None),
            Self::TooMany {
                retry_after_secs,
                message,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                t("err-too-many"),
                message,
                Some(retry_after_secs),
            ),
            Self::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                t("err-unavailable-title"),
                t("err-unavailable"),
                None,
            ),
            Self::TimedOut => (
                StatusCode::SERVICE_UNAVAILABLE,
                t("err-unavailable-title"),
                t("err-timed-out"),
                Some(crate::error::UNAVAILABLE_RETRY_SECS),
            ),
            Self::Internal(cause) => {
                tracing::error!(error = %cause, "page failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    t("err-internal-title"),
                    t("err-internal"),
                    None,
                )
            }
        };
        let ctx = super::i18n::ctx();
        let (brand_name, look) = ctx
            .brand
            .unwrap_or_else(|| ("pactd".to_owned(), crate::who::Look::none()));
        let page = ErrorPage {
            brand_name: &brand_name,
            title: &title,
            message: &message,
            signed_in: false,
            look,
        };
        let mut res = render(&page, status);
        if db_down {
            res = crate::error::unavailable(res);
        }
        if let Some(secs) = retry {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        res
    }
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for PageError {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}
