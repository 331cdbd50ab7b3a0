//! The headers every response carries.

use actix_web::http::header;
use actix_web::middleware::DefaultHeaders;

/// Headers every response carries unless its handler set its own: no MIME
/// sniffing, no referrer leaking ids in URLs, and a policy that lets no
/// response run script, load anything or be framed (the front page sets a
/// looser one for its own script and style sheet).
pub fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        .add((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ))
        .add((header::X_FRAME_OPTIONS, "DENY"))
}
