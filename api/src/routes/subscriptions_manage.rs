//! Managing a subscription after it exists: read it, change it, enable it
//! again, send again what failed, rotate its signing secret, send it a test
//! event.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::outbound::delivery::{self, Recovery};
use domain::outbound::subscription::{self, SubscriptionPatch, SubscriptionView};

use crate::http::auth::{AdminOnly, Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::idempotency::ok_tagged;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::subscriptions::{EnableIn, PatchIn, RecoverIn, RotateIn, RotatedOut, TestOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(get_one);
    cfg.service(enable);
    cfg.service(recover);
    cfg.service(patch);
    cfg.service(rotate_secret);
    cfg.service(send_test);
}

/// One subscription, without its secret.
#[utoipa::path(
    operation_id = "get_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id")),
    responses(
        (status = 200, description = "The subscription", body = SubscriptionView, headers(("ETag" = String)), example = json!(examples::subscription())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/subscriptions/{id}")]
async fn get_one(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let found = subscription::find(&state.db, id.into_inner().0).await?;
    Ok(ok_tagged(&SubscriptionView::from(found)))
}

/// Enable a disabled subscription again.
///
/// Whether an admin disabled it, its receiver answered `410`, or its
/// deliveries failed for `LEADPIPE_SUBSCRIPTION_DISABLE_AFTER`: the
/// deliveries held meanwhile go out, in per-lead order, and its failure
/// streak starts afresh. Enabling an active subscription changes nothing.
#[utoipa::path(
    operation_id = "enable_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id"), IdempotencyKey, IfMatch),
    request_body(content = EnableIn, description = "`{}`", example = json!({})),
    responses(
        (status = 200, description = "The subscription, active", body = SubscriptionView, headers(("ETag" = String)), example = json!(examples::subscription_enabled())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/subscriptions/{id}/enable")]
async fn enable(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    write: Write<EnableIn>,
) -> WriteResult {
    let outbound = state.http.outbound_policy();
    let id = id.into_inner().0;
    write
        .run(&caller, KeyRule::Optional, move |txn, _, if_match| {
            Box::pin(async move {
                let enabled = subscription::enable(txn, &outbound, id, &if_match).await?;
                Reply::tagged(StatusCode::OK, &enabled)
            })
        })
        .await
}

/// Send a subscription again everything that failed since a moment.
///
/// Every delivery created at or after `since` that died goes back in line
/// (attempts from zero) and every one waiting for a retry is due at once:
/// the same deliveries with the same `webhook-id`s, so a receiver that did
/// get one can tell it is a repeat, claimed in per-lead order as any.
/// A disabled subscription's wait until it is enabled.
#[utoipa::path(
    operation_id = "recover_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id"), IdempotencyKey),
    request_body(content = RecoverIn, example = json!({"since": "2026-12-01T00:00:00Z"})),
    responses(
        (status = 200, description = "How many deliveries go out again", body = Recovery, example = json!(examples::recovery())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/subscriptions/{id}/recover")]
async fn recover(
    caller: Caller<AdminOnly>,
    id: web::Path<PathId>,
    write: Write<RecoverIn>,
) -> WriteResult {
    let id = id.into_inner().0;
    write
        .run(&caller, KeyRule::Optional, move |txn, input, _| {
            Box::pin(async move {
                let recovered = delivery::recover(txn, id, input.since).await?;
                Reply::new(StatusCode::OK, &recovered)
            })
        })
        .await
}

/// Change a subscription's URL, event types, description, or whether it is enabled.
#[utoipa::path(
    operation_id = "patch_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id"), IdempotencyKey, IfMatch),
    request_body(content = PatchIn, example = json!({"event_types": ["lead.created", "lead.updated", "deal.stage_changed"], "enabled": true})),
    responses(
        (status = 200, description = "The subscription after the change", body = SubscriptionView, headers(("ETag" = String)), example = json!(examples::subscription_changed())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
        (status = 422, description = "`/problems/validation`: an internal URL or an unknown event type"),
    ),
    security(("bearer" = ["admin"])),
)]
#[patch("/api/subscriptions/{id}")]
async fn patch(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    write: Write<PatchIn>,
) -> WriteResult {
    let outbound = state.http.outbound_policy();
    let id = id.into_inner().0;
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let patch = SubscriptionPatch {
                    url: input.url,
                    event_types: input.event_types,
                    description: input.description.map(Some),
                    enabled: input.enabled,
                    rate_limit: input.rate_limit.change(),
                };
                let updated = subscription::update(txn, &outbound, id, patch, &if_match).await?;
                Reply::tagged(StatusCode::OK, &updated)
            })
        })
        .await
}

/// Rotate a subscription's signing secret.
///
/// The new `whsec_` secret is shown only in this response (a replay of the
/// same `Idempotency-Key` answers it from a sealed copy). Until
/// `previous_secret_valid_until` every delivery's `webhook-signature`
/// carries two `v1,` entries, one per secret, so the receiver can switch at
/// its own pace; after that, only the new secret signs.
#[utoipa::path(
    operation_id = "rotate_subscription_secret",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id"), IdempotencyKey),
    request_body(content = RotateIn, description = "`{}` for the defaults", example = json!({"overlap_seconds": 86400})),
    responses(
        (status = 200, description = "The new secret", body = RotatedOut, example = json!(examples::rotated_secret())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
        (status = 409, description = "`/problems/conflict`: rotated concurrently"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/subscriptions/{id}/rotate-secret")]
async fn rotate_secret(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    write: Write<RotateIn>,
) -> WriteResult {
    let keyring = state.http.keyring.clone();
    let id = id.into_inner().0;
    write
        .run(&caller, KeyRule::Optional, move |txn, input, _| {
            Box::pin(async move {
                let overlap = input.overlap_seconds.map(chrono::Duration::seconds);
                let rotated = subscription::rotate_secret(txn, &keyring, id, overlap).await?;
                let out = RotatedOut {
                    secret: rotated.secret,
                    previous_secret_valid_until: rotated.previous_valid_until,
                };
                Ok(Reply::new(StatusCode::OK, &out)?.reveals_secret())
            })
        })
        .await
}

/// Send a subscription a signed `ping` event.
///
/// Queued and delivered by the publisher like any event, to this
/// subscription only, with the same signatures, address checks and retries;
/// the delivery is recorded.
#[utoipa::path(
    operation_id = "test_subscription",
    tag = "subscriptions",
    params(("id" = i64, Path, description = "The subscription's id")),
    responses(
        (status = 202, description = "Queued", body = TestOut, example = json!(examples::test_event())),
        (status = 404, description = "`/problems/not-found`: no such subscription"),
        (status = 409, description = "`/problems/conflict`: the subscription is disabled"),
    ),
    security(("bearer" = ["admin"])),
)]
#[post("/api/subscriptions/{id}/test")]
async fn send_test(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let correlation = caller.actor().correlation_id;
    let event_id = subscription::send_test(&state.db, id.into_inner().0, correlation).await?;
    Ok(HttpResponse::Accepted().json(TestOut { event_id }))
}
