//! `/api/subscriptions`: downstream systems that receive our events.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::auth::Role;
use domain::subscription::{self, NewSubscription, SubscriptionView};
use serde::{Deserialize, Serialize};

use crate::auth::Authenticated;
use crate::body::{parse_json, read_json_bytes};
use crate::error::ApiError;
use crate::idempotency::{self, KeyRule, Reply};
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/subscriptions")
            .route("", web::post().to(create))
            .route("", web::get().to(list))
            .route("/{id}", web::delete().to(delete)),
    );
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscriptionIn {
    url: String,
    #[serde(default)]
    event_types: Vec<String>,
    description: Option<String>,
}

#[derive(Serialize)]
struct CreatedOut {
    #[serde(flatten)]
    subscription: SubscriptionView,
    /// Shown only in this response: verify our signatures with it.
    secret: String,
}

async fn create(
    caller: Authenticated,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Admin])?;
    let body = read_json_bytes(&req, payload, state.http.max_body_bytes).await?;
    let input: SubscriptionIn = parse_json(&body)?;
    let outbound = state.http.outbound_policy();
    idempotency::run(
        &state,
        &caller,
        &req,
        &body,
        KeyRule::Optional,
        move |txn| {
            Box::pin(async move {
                let new = NewSubscription {
                    url: input.url,
                    event_types: input.event_types,
                    description: input.description,
                };
                let created = subscription::create(txn, &outbound, new).await?;
                let location = format!("/api/subscriptions/{}", created.subscription.id);
                let out = CreatedOut {
                    subscription: created.subscription,
                    secret: created.secret,
                };
                Ok(Reply::new(StatusCode::CREATED, &out)?.location(location))
            })
        },
    )
    .await
}

#[derive(Serialize)]
struct SubscriptionList {
    data: Vec<SubscriptionView>,
}

async fn list(caller: Authenticated, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Ops, Role::Admin])?;
    let data = subscription::list(&state.db).await?;
    Ok(HttpResponse::Ok().json(SubscriptionList { data }))
}

async fn delete(
    caller: Authenticated,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(&[Role::Admin])?;
    subscription::delete(&state.db, id.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
