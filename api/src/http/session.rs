//! The page's session cookie: reading it, checking a write's CSRF token,
//! and writing `Set-Cookie`. The cookie holds a session id and nothing
//! else; a bearer token is never taken from it.

use actix_web::http::{Method, header};
use actix_web::{HttpRequest, web};
use domain::session::Current;

use crate::config::SessionSettings;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "leadpipe_session";
/// The header a cookie-authenticated write carries its CSRF token in.
pub const CSRF_HEADER: &str = "X-CSRF-Token";

/// The session id in the request's `Cookie` header(s), if any.
pub fn session_cookie(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .filter(|value| !value.is_empty() && value.len() <= 128)
}

/// Whether a request may change something (anything but `GET`, `HEAD`,
/// `OPTIONS`): with a cookie, it needs the session's CSRF token.
pub fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What the session cookie proves: `Ok(None)` without one. An unknown,
/// ended or expired session is `401` (and counts as a failed
/// authentication of the client address); a write without the session's
/// CSRF token `403 /problems/csrf-token-invalid`.
pub async fn signed_in(
    req: &HttpRequest,
    state: &web::Data<AppState>,
) -> Result<Option<Current>, ApiError> {
    let Some(id) = session_cookie(req) else {
        return Ok(None);
    };
    let lifetimes = state.http.sessions.lifetimes();
    let Some(current) = domain::session::find(&state.db, &id, lifetimes).await? else {
        state
            .limits
            .auth_failed(crate::http::rate_limit::client_address(req))?;
        return Err(ApiError::Unauthorized);
    };
    if is_unsafe(req.method()) {
        let token = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !current.csrf_matches(token) {
            return Err(ApiError::CsrfTokenInvalid);
        }
    }
    Ok(Some(current))
}

/// Whether the page was reached over TLS: served so, or (trusted by
/// `LEADPIPE_TRUST_FORWARDED_PROTO`) a proxy's `X-Forwarded-Proto: https`.
pub fn over_tls(req: &HttpRequest, settings: &SessionSettings) -> bool {
    req.app_config().secure()
        || (settings.trust_forwarded_proto
            && req
                .headers()
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https")))
}

/// `Set-Cookie` for session `id`, living `max_age_secs`.
pub fn set_cookie(id: &str, max_age_secs: i64, secure: bool) -> String {
    format!(
        "{COOKIE}={id}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}",
        max_age_secs.max(0),
        if secure { "; Secure" } else { "" }
    )
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie(secure: bool) -> String {
    set_cookie("", 0, secure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn the_cookie_is_found_among_others() {
        let req = TestRequest::default()
            .insert_header((header::COOKIE, "a=1; leadpipe_session=lps_x ; b=2"))
            .to_http_request();
        assert_eq!(session_cookie(&req).as_deref(), Some("lps_x"));
        let req = TestRequest::default()
            .insert_header((header::COOKIE, "xleadpipe_session=1"))
            .to_http_request();
        assert_eq!(session_cookie(&req), None);
    }

    #[test]
    fn cookies_are_http_only_and_strict() {
        let cookie = set_cookie("lps_x", 60, false);
        assert_eq!(
            cookie,
            "leadpipe_session=lps_x; Path=/; Max-Age=60; HttpOnly; SameSite=Strict"
        );
        assert!(set_cookie("lps_x", 60, true).ends_with("; Secure"));
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }
}
