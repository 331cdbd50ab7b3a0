//! A declared body over the limit is refused before any handler runs, on
//! every route: also on those that read no body, so a client cannot make the
//! server drain megabytes nobody asked for. Handlers that read a body still
//! count the bytes (a chunked body declares no length).

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{ResponseError, web};

use crate::http::body::declared_length;
use crate::http::error::ApiError;
use crate::http::state::AppState;

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
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
    Ok(next.call(req).await?.map_into_left_body())
}
