//! A declared body over the limit is refused before any handler runs, on
//! every route: also on those that read no body, so a client cannot make the
//! server drain megabytes nobody asked for. Handlers that read a body still
//! count the bytes (a chunked body declares no length).
//!
//! A chunked body its handler left unread ends its connection too. actix
//! drains such a body (it closes for an unread `Content-Length` body) for as
//! long as the client sends it, at whatever pace: a `401`, `413` or `408`
//! would leave the connection held by a client that never stops. Holding
//! the body's stream until the answer is sent makes actix close instead.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{HttpMessage, ResponseError, web};
use futures::Stream;

use crate::http::body::declared_length;
use crate::http::error::ApiError;
use crate::http::state::AppState;

pub async fn middleware(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<EitherBody<impl MessageBody, HoldingBody>>>, actix_web::Error>
{
    let limit = req.app_data::<web::Data<AppState>>().map(|state| {
        if req.path().starts_with("/api/imports") {
            state.http.import_max_bytes
        } else {
            state.http.max_body_bytes
        }
    });
    let declared = declared_length(req.request());
    if let (Some(limit), Some(declared)) = (limit, declared)
        && declared > limit
    {
        let response = ApiError::PayloadTooLarge { limit }.error_response();
        return Ok(req.into_response(response).map_into_right_body());
    }
    if !is_chunked(&req) {
        let response = next.call(req).await?;
        return Ok(response
            .map_body(|_, answer| EitherBody::left(answer))
            .map_into_left_body());
    }
    let body = Rc::new(RefCell::new(req.take_payload()));
    let shared: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> =
        Box::pin(SharedBody(body.clone()));
    req.set_payload(Payload::from(shared));
    // Read to its end, the stream is spent and holding it changes nothing.
    let response = next.call(req).await?.map_body(|_, answer| {
        EitherBody::right(HoldingBody {
            answer: answer.boxed(),
            _request_body: body,
        })
    });
    Ok(response.map_into_left_body())
}

fn is_chunked(req: &ServiceRequest) -> bool {
    req.headers()
        .get(header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
}

/// The request's body stream, shared by its handler and [`HeldBody`].
struct SharedBody(Rc<RefCell<Payload>>);

impl Stream for SharedBody {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_next(cx)
    }
}

/// The answer, holding the request's body stream until actix has sent it
/// whole: a request body still wanted when the answer ends is one actix
/// will not drain, and it ends the connection.
pub struct HoldingBody {
    answer: BoxBody,
    _request_body: Rc<RefCell<Payload>>,
}

impl MessageBody for HoldingBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.answer.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.answer).poll_next(cx)
    }
}
