//! `POST /webhooks/{source}`: verify the raw body's signature, store the
//! event once per event id, answer, and wake the inbox workers. No lead work
//! here, so the sender gets its answer as soon as the inbox row is
//! committed.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_web::{get, post};
use chrono::Utc;
use domain::inbound::accept::{self, Accepted, Refused};
use domain::inbound::inbox::InboxState;
use domain::inbound::inbox::receive::{Delivery, Received};
use domain::inbound::signature::meta::Handshake;
use domain::inbound::signature::{HeaderFn, RequestTarget};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use crate::http::admitted::Admitted;
use crate::http::body::read_bytes;
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::rate_limit::client_address;
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(receive_webhook);
    cfg.service(webhook_handshake);
}

/// The signature headers of the schemes; which ones a delivery needs
/// depends on its source's `scheme`.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
struct SignatureHeaders {
    /// `standard-webhooks`: the message id (the default event id).
    #[param(rename = "webhook-id")]
    webhook_id: Option<String>,
    /// `standard-webhooks`: unix seconds; must be within the source's
    /// `tolerance_secs` (default 300) in the past or future.
    #[param(rename = "webhook-timestamp")]
    webhook_timestamp: Option<String>,
    /// `standard-webhooks`: space-separated `v1,<base64 HMAC-SHA256 of
    /// "{webhook-id}.{webhook-timestamp}.{body}">` (or `v1a,<base64>` ed25519
    /// signatures for `whpk_` keys); any may match.
    #[param(rename = "webhook-signature")]
    webhook_signature: Option<String>,
    /// `standard-webhooks`, as Svix names it: `webhook-id`'s value, read
    /// when the request carries no `webhook-*` header.
    #[param(rename = "svix-id")]
    svix_id: Option<String>,
    /// `standard-webhooks`, as Svix names it: `webhook-timestamp`'s value.
    #[param(rename = "svix-timestamp")]
    svix_timestamp: Option<String>,
    /// `standard-webhooks`, as Svix names it: `webhook-signature`'s value.
    #[param(rename = "svix-signature")]
    svix_signature: Option<String>,
    /// `stripe`: `t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">[,v1=…]`.
    #[param(rename = "Stripe-Signature")]
    stripe_signature: Option<String>,
    /// `github` and `meta-lead-ads`: `sha256=<hex HMAC-SHA256 of the body>`.
    #[param(rename = "X-Hub-Signature-256")]
    x_hub_signature_256: Option<String>,
    /// `github`: the delivery id (the default event id; not signed).
    #[param(rename = "X-GitHub-Delivery")]
    x_github_delivery: Option<String>,
    /// `github`: the event type (not signed).
    #[param(rename = "X-GitHub-Event")]
    x_github_event: Option<String>,
    /// `hmac-sha256`: hex or base64 HMAC-SHA256 of the body, optionally
    /// prefixed `sha256=`. The header's name is the source's
    /// `signature_header` (default `X-Signature`).
    #[param(rename = "X-Signature")]
    x_signature: Option<String>,
    /// `typeform`: `sha256=<base64 HMAC-SHA256 of the body>`.
    #[param(rename = "Typeform-Signature")]
    typeform_signature: Option<String>,
    /// `calendly`: `t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">`.
    #[param(rename = "Calendly-Webhook-Signature")]
    calendly_webhook_signature: Option<String>,
    /// `slack`: `v0=<hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}">`.
    #[param(rename = "X-Slack-Signature")]
    x_slack_signature: Option<String>,
    /// `slack`: unix seconds, within the source's `tolerance_secs`.
    #[param(rename = "X-Slack-Request-Timestamp")]
    x_slack_request_timestamp: Option<String>,
    /// `hubspot-v3`: base64 HMAC-SHA256 of method, full URL (from
    /// `LEADPIPE_PUBLIC_URL`), body and `X-HubSpot-Request-Timestamp`.
    #[param(rename = "X-HubSpot-Signature-v3")]
    x_hubspot_signature_v3: Option<String>,
    /// `hubspot-v3`: unix milliseconds, within the source's `tolerance_secs`.
    #[param(rename = "X-HubSpot-Request-Timestamp")]
    x_hubspot_request_timestamp: Option<String>,
}

/// The answer to a sender.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookAck)]
struct Acknowledged {
    /// The inbox event; for a duplicate, the original delivery's.
    id: i64,
    event_id: String,
    state: InboxState,
    duplicate: bool,
}

/// The answer to a sender whose source's deliveries carry several events
/// (`events_pointer`): one entry per event, in the delivery's order.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookBatchAck)]
struct BatchAcknowledged {
    events: Vec<Acknowledged>,
}

/// What a sender is answered: one event, or each event of a batch.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = WebhookAnswer)]
#[allow(dead_code)]
enum Answer {
    One(Acknowledged),
    Batch(BatchAcknowledged),
}

/// Receive a signed webhook delivery.
///
/// **Roles:** none — the signature authenticates the sender (no bearer token).
///
/// The raw body (at most `LEADPIPE_MAX_BODY_BYTES`) is verified, in constant
/// time, before anything is parsed, then stored in the inbox once per event:
/// a unique key on `(source, event_id)`. The answer goes out right after the
/// inbox commit; the inbox workers, woken at once, turn the event into a
/// lead. Every delivery is safe to repeat. While the workers are behind by
/// `LEADPIPE_INBOX_BACKLOG_LIMIT` events, deliveries are refused with 503
/// and `Retry-After`.
///
/// A source with an `events_pointer` (`meta-lead-ads` and `hubspot-v3` by
/// default) stores each event the delivery carries as an inbox event of its
/// own, identified by its own id: the answer lists them (`{"events": […]}`),
/// `202` when one of them is new.
#[utoipa::path(
    operation_id = "receive_webhook",
    tag = "webhooks",
    params(("source" = String, Path, description = "The source's name"), SignatureHeaders),
    request_body(description = "The sender's payload, exactly as signed, whatever its `Content-Type` (senders send `application/json`; the bytes are verified as received, and parsed as JSON for the lead mapping)",
        content((inline(crate::http::params::Binary) = "application/octet-stream"))),
    responses(
        (status = 202, description = "A new event, queued for processing; for a source with an `events_pointer`, `{\"events\": […]}` with each event the delivery carried, one of them new (no `Location` then)", body = Answer,
            headers(("Location" = String, description = "`/api/ops/inbox/{id}`")), example = json!(examples::webhook_queued())),
        (status = 200, description = "A duplicate of a stored event (the original's `id` and current `state`, `duplicate: true`), or an event type the source does not allow (`state: skipped`); for a source with an `events_pointer`, each event the delivery carried, none of them new. A `slack` source's signed `url_verification` request is answered `{\"challenge\": …}` instead, and not stored",
            body = Answer, headers(("Location" = String, description = "`/api/ops/inbox/{id}`")), example = json!(examples::webhook_duplicate())),
        (status = 401, description = "`/problems/invalid-signature`: no such source, or the signature is missing, malformed, outside the time tolerance or wrong — one answer for all, so that source names cannot be probed; the reason is logged and counted (`leadpipe_webhook_deliveries_total{result=\"rejected\",reason}`). Nothing is stored"),
        (status = 408, description = "`/problems/body-timeout`: the body came too slowly (`LEADPIPE_BODY_TIMEOUT_SECS`, then `LEADPIPE_BODY_MIN_RATE` bytes a second); nothing is stored and the connection closes"),
        (status = 413, description = "`/problems/payload-too-large`: the body is over `LEADPIPE_MAX_BODY_BYTES`"),
        (status = 422, description = "`/problems/validation`: a source with an `events_pointer` was sent more than 1000 events in one delivery; nothing is stored"),
        (status = 429, description = "`/problems/too-many-requests`: more verified deliveries to this source than `LEADPIPE_WEBHOOK_RATE` per second (after a burst of `LEADPIPE_WEBHOOK_BURST`), or more unverified attempts from this client address than `LEADPIPE_AUTH_FAIL_PER_MINUTE`; retry after `Retry-After`", headers(("Retry-After" = String))),
        (status = 500, description = "`/problems/internal`"),
        (status = 503, description = "`/problems/unavailable`: the database is unreachable; or `/problems/inbox-backlog-full`: `LEADPIPE_INBOX_BACKLOG_LIMIT` events wait unprocessed, nothing was stored. The sender retries after `Retry-After`", headers(("Retry-After" = String))),
    ),
)]
#[post("/webhooks/{source}")]
async fn receive_webhook(
    _: Admitted,
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
    correlation: CorrelationId,
) -> Result<HttpResponse, ApiError> {
    let door = accept::door(&state.db, &state.http.keyring, &name).await?;
    // The body is read (and its size checked) for unknown sources too, so
    // that nothing in the answer tells a configured name from another.
    let limits = state.http.body_limits();
    let body = read_bytes(&req, payload, limits.max_bytes, limits.pace)
        .await
        .inspect_err(|err| {
            door.refused_unread(match err {
                ApiError::PayloadTooLarge { .. } => "too_large",
                ApiError::BodyTimeout { .. } => "too_slow",
                _ => "unreadable",
            })
        })?;
    let headers = HeaderFn(|name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    // The URL the sender called, for schemes that sign it: the public base
    // (a proxy may change host, scheme and prefix) and the path as received.
    let uri = state.http.public_base().map(|base| {
        let path = req
            .uri()
            .path_and_query()
            .map_or(req.path(), |pq| pq.as_str());
        format!("{base}{path}")
    });
    let delivery = Delivery {
        headers: &headers,
        body: &body,
        correlation_id: Some(correlation.0),
        target: uri.as_deref().map(|uri| RequestTarget {
            method: req.method().as_str(),
            uri,
        }),
    };
    // Only verified deliveries spend the source's allowance.
    let accepted = door
        .accept(
            &state.db,
            &state.http.keyring,
            &state.unknown_source,
            &delivery,
            Utc::now(),
            |source| state.limits.webhook(source),
        )
        .await;
    match accepted {
        Ok(Accepted::Stored(received)) => {
            if received.needs_processing() {
                state.admission.admitted();
            }
            Ok(acknowledge(received))
        }
        Ok(Accepted::Batch(batch)) => {
            let new = batch.iter().filter(|r| r.needs_processing()).count();
            for _ in 0..new {
                state.admission.admitted();
            }
            Ok(acknowledge_batch(batch))
        }
        Ok(Accepted::Challenge(challenge)) => {
            Ok(HttpResponse::Ok().json(serde_json::json!({ "challenge": challenge })))
        }
        Err(Refused::Unverified(reason)) => {
            // An unverified attempt counts against its client's address,
            // as a failed login does, never against the source's allowance:
            // else anyone could spend a real sender's budget with junk.
            state.limits.auth_failed(client_address(&req))?;
            Err(ApiError::InvalidSignature(reason))
        }
        Err(Refused::OverAllowance(limited)) => Err(limited),
        Err(Refused::Failed(error)) => Err(error.into()),
    }
}

/// `202` for a new event to process; `200` for a duplicate (with the
/// original's id) or an event type the source skips.
fn acknowledge(received: Received) -> HttpResponse {
    let mut response = if received.needs_processing() {
        HttpResponse::Accepted()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::LOCATION, format!("/api/ops/inbox/{}", received.id)))
        .json(acknowledged(received))
}

/// `202` when one of the events is new, else `200`.
fn acknowledge_batch(batch: Vec<Received>) -> HttpResponse {
    let mut response = if batch.iter().any(Received::needs_processing) {
        HttpResponse::Accepted()
    } else {
        HttpResponse::Ok()
    };
    response.json(BatchAcknowledged {
        events: batch.into_iter().map(acknowledged).collect(),
    })
}

fn acknowledged(received: Received) -> Acknowledged {
    Acknowledged {
        id: received.id,
        event_id: received.event_id,
        state: received.state,
        duplicate: received.duplicate,
    }
}

/// Meta's subscription handshake query.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct HandshakeQuery {
    /// `subscribe`.
    #[param(rename = "hub.mode")]
    hub_mode: Option<String>,
    /// Answered verbatim.
    #[param(rename = "hub.challenge")]
    hub_challenge: Option<String>,
    /// Must be the source's `verify_token`.
    #[param(rename = "hub.verify_token")]
    hub_verify_token: Option<String>,
}

/// Answer a sender's subscription handshake (Meta Lead Ads).
///
/// **Roles:** none — the source's `verify_token` authenticates the request.
///
/// Meta checks a callback URL with `GET
/// /webhooks/{source}?hub.mode=subscribe&hub.challenge=…&hub.verify_token=…`
/// and expects the challenge back. It is answered only for a
/// `meta-lead-ads` source whose stored `verify_token` the request names
/// (compared in constant time); anything else, an unknown name included,
/// gets the same `403`. A refusal counts against the client's address as a
/// failed signature does. Nothing is stored.
#[utoipa::path(
    operation_id = "webhook_handshake",
    tag = "webhooks",
    params(("source" = String, Path, description = "The source's name"), HandshakeQuery),
    responses(
        (status = 200, description = "The `hub.challenge`, verbatim", content_type = "text/plain", body = String),
        (status = 403, description = "`/problems/forbidden`: no such `meta-lead-ads` source, no `verify_token` stored, `hub.mode` is not `subscribe`, or the token is not the source's — one answer for all"),
        (status = 429, description = "`/problems/too-many-requests`: more refused attempts from this client address than `LEADPIPE_AUTH_FAIL_PER_MINUTE`; retry after `Retry-After`", headers(("Retry-After" = String))),
        (status = 500, description = "`/problems/internal`"),
        (status = 503, description = "`/problems/unavailable`: the database is unreachable", headers(("Retry-After" = String))),
    ),
)]
#[get("/webhooks/{source}")]
async fn webhook_handshake(
    state: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    // A query that does not parse names no token: refused like a wrong one.
    let handshake = web::Query::<Handshake>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default();
    let door = accept::door(&state.db, &state.http.keyring, &name).await?;
    match door.handshake(&handshake) {
        Some(challenge) => Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(challenge)),
        None => {
            state.limits.auth_failed(client_address(&req))?;
            Err(ApiError::Forbidden(
                "the handshake does not name this source's verify token".into(),
            ))
        }
    }
}
