//! `/api/subscriptions`: downstream systems that receive our events.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{delete, get, post};
use domain::outbound::subscription::{self, NewSubscription};

use crate::http::auth::{AdminOnly, Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::IdempotencyKey;
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::subscriptions::{CreatedOut, SubscriptionIn, SubscriptionList};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create).service(list).service(delete);
    super::subscriptions_manage::configure(cfg);
}

/// Subscribe a downstream system to our events.
///
/// Deliveries are Standard Webhooks requests (`webhook-id`,
/// `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of
/// "{id}.{timestamp}.{body}">`) signed with the `secret` shown only in this
/// response; retried with backoff on `429`, `5xx` and timeouts; `410`
/// disables the subscription. The secret is stored sealed; a replay of the
/// same `Idempotency-Key` answers the same body, kept sealed meanwhile.
/// Without a sealing key on the server: `503 /problems/secret-key-missing`.
#[utoipa::path(
    operation_id = "create_subscription",
    tag = "subscriptions",
    params(IdempotencyKey),
    request_body(content = SubscriptionIn, example = json!({"url": "https://crm.example.com/hooks/leadpipe", "event_types": ["lead.created", "lead.updated"], "description": "Sales CRM sync"})),
    responses(
        (status = 201, description = "Created; the only response that shows the `secret`", body = CreatedOut,
            headers(("Location" = String)), example = json!(examples::subscription_created())),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/subscriptions")]
async fn create(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    write: Write<SubscriptionIn>,
) -> WriteResult {
    let outbound = state.http.outbound_policy();
    let keyring = state.http.keyring.clone();
    write
        .run(&caller, KeyRule::Optional, move |txn, input, _| {
            Box::pin(async move {
                let new = NewSubscription {
                    url: input.url,
                    event_types: input.event_types,
                    description: input.description,
                    rate_limit: input.rate_limit,
                };
                let created = subscription::create(txn, &outbound, &keyring, new).await?;
                let location = format!("/api/subscriptions/{}", created.subscription.id);
                let out = CreatedOut {
                    subscription: created.subscription,
                    secret: created.secret,
                };
                // The secret is in the body: a stored copy for replay is sealed.
                Ok(Reply::new(StatusCode::CREATED, &out)?
                    .location(location)
                    .reveals_secret())
            })
        })
        .await
}

/// List subscriptions.
#[utoipa::path(
    operation_id = "list_subscriptions",
    tag = "subscriptions",
    responses((status = 200, description = "Every subscription", body = SubscriptionList, example = json!(examples::subscription_list()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/subscriptions")]
async fn list(_: Caller<OpsUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let data = subscription::list(&state.db).await?;
    Ok(HttpResponse::Ok().json(SubscriptionList { data }))
}

/// Delete a subscription.
#[utoipa::path(
    operation_id = "delete_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
    ),
    security(("bearer" = ["admin"])),
)]
#[delete("/api/subscriptions/{id}")]
async fn delete(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    subscription::delete(&state.db, id.into_inner().0).await?;
    Ok(HttpResponse::NoContent().finish())
}
