//! The webhook door's admission as an extractor: a delivery the inbox has
//! no room for is refused before any other work ([`crate::http::admission`]).

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures::future::LocalBoxFuture;

use crate::http::admission::REFUSAL_HOLD;
use crate::http::body::discard_small_body;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// A webhook the inbox has room for: the extractor refuses the request with
/// `503` and `Retry-After` while the backlog is at its limit, before any
/// other work (a refused delivery is cheaper for the database than a stored
/// one). The refusal is held [`REFUSAL_HOLD`], its body read meanwhile: a
/// sender that resends at once must not spend the workers' CPU on
/// refusals.
pub struct Admitted;

/// A refused delivery's body is read (and dropped) up to this size, so the
/// sender keeps its connection; most webhook bodies are a few KiB.
const REFUSED_BODY_READ: usize = 64 * 1024;

impl FromRequest for Admitted {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let refused = req
            .app_data::<web::Data<AppState>>()
            .map(|state| state.admission.check());
        let req = req.clone();
        match refused {
            None => Box::pin(async { Err(ApiError::internal("application state missing")) }),
            Some(Ok(())) => Box::pin(async { Ok(Admitted) }),
            Some(Err(full)) => {
                let body = web::Payload::from_request(&req, payload);
                Box::pin(async move {
                    domain::inbound::accept::count(
                        domain::inbound::accept::UNKNOWN_SOURCE,
                        "rejected",
                        "backlog_full",
                    );
                    let discard = async {
                        if let Ok(body) = body.await {
                            discard_small_body(&req, body, REFUSED_BODY_READ).await;
                        }
                    };
                    futures::join!(discard, tokio::time::sleep(REFUSAL_HOLD));
                    Err(full)
                })
            }
        }
    }
}
