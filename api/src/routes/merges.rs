//! `POST /api/leads/{id}/merge`, `GET /api/merges/{id}` and
//! `POST /api/merges/{id}/undo`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, post};
use domain::lead::merge;

use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::{IdempotencyKeyRequired, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::merges::{MergeIn, MergeOut, MergeRecordOut, UndoIn, UndoOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(merge_leads)
        .service(get_merge)
        .service(undo_merge);
}

/// Merge leads into this one.
///
/// In one transaction: the survivor (`{id}`) takes, per sender field
/// (`email`, `phone`, `name`, `company`), the value of the most recently
/// updated lead that has one, unless `fields` names the lead to keep it
/// from; `status` and `owner_id` stay the survivor's unless `fields` says
/// otherwise. Timeline, notes, tasks, deals, duplicate hints and a
/// conversion move to the survivor. The merged leads' keys become aliases:
/// a later delivery of one (intake, webhook, reconcile, import) updates the
/// survivor and never recreates the old lead; `GET /api/leads/{merged}`
/// answers `308` to the survivor and writes to it `409
/// /problems/lead-merged`. Writes the outbox event `lead.merged`.
/// `Idempotency-Key` is required; `If-Match` is checked against the
/// survivor. Of two merges racing over the same leads one wins, the other
/// gets `409`.
#[utoipa::path(
    operation_id = "merge_leads",
    tag = "leads",
    params(("id" = i64, Path, description = "The surviving lead's id"), IdempotencyKeyRequired, IfMatch),
    request_body(content = MergeIn, example = json!({"lead_ids": [118, 131], "fields": {"phone": 131}})),
    responses(
        (status = 200, description = "Merged; `ETag` is the survivor's new version", body = MergeOut,
            headers(("Location" = String, description = "The merge"), ("ETag" = String)), example = json!(examples::merge_result())),
        (status = 404, description = "`/problems/not-found`: no such survivor"),
        (status = 409, description = "`/problems/lead-merged` (one of the leads was merged already; `survivor_id` names where) or `/problems/conflict` (more than one of the leads was converted)"),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` is not the survivor's version"),
        (status = 422, description = "`/problems/validation`: `lead_ids` empty, repeated, naming the survivor or a lead that does not exist; an unknown field in `fields`, or a winner that is not one of the leads"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/leads/{id}/merge")]
async fn merge_leads(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<MergeIn>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Required, move |txn, input, if_match| {
            Box::pin(async move {
                let merged = merge::merge(txn, id, &input.into(), &if_match, &actor).await?;
                let location = format!("/api/merges/{}", merged.merge.id);
                let out = MergeOut {
                    merge: merged.merge.into(),
                    lead: merged.survivor.into(),
                };
                Ok(Reply::tagged(StatusCode::OK, &out)?.location(location))
            })
        })
        .await
}

/// One merge, with where each of the survivor's values came from.
#[utoipa::path(
    operation_id = "get_merge",
    tag = "leads",
    params(("id" = i64, Path, description = "The merge's id")),
    responses(
        (status = 200, description = "The merge", body = MergeRecordOut, example = json!(examples::merge())),
        (status = 404, description = "`/problems/not-found`: no such merge"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/merges/{id}")]
async fn get_merge(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let found = merge::find_merge(state.reads.db(), id.into_inner().0).await?;
    Ok(HttpResponse::Ok().json(MergeRecordOut::from(found)))
}

/// Undo a merge.
///
/// The merged leads come back with their keys and their own values
/// (including what their senders sent while merged); the timeline rows,
/// tasks, deals, duplicate hints and conversion that moved go back; the
/// survivor's values the merge set go back to what they were, unless
/// changed since. Writes the outbox event `lead.unmerged`.
/// `Idempotency-Key` is required. `409 /problems/conflict`, saying why,
/// once the merge was undone, after the survivor was erased, or while the
/// survivor is itself merged into another lead (undo that merge first).
#[utoipa::path(
    operation_id = "undo_merge",
    tag = "leads",
    params(("id" = i64, Path, description = "The merge's id"), IdempotencyKeyRequired),
    responses(
        (status = 200, description = "Undone; `ETag` is the survivor's new version", body = UndoOut,
            headers(("ETag" = String)), example = json!(examples::undo_result())),
        (status = 404, description = "`/problems/not-found`: no such merge"),
        (status = 409, description = "`/problems/conflict`: undone already, the survivor erased, or the survivor merged again"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/merges/{id}/undo")]
async fn undo_merge(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<UndoIn>,
) -> WriteResult {
    let (id, actor) = (id.into_inner().0, caller.actor());
    let write = write.read_or_default().await?;
    let hasher = write.state().db.hasher().clone();
    write
        .run(&caller, KeyRule::Required, move |txn, _, _| {
            Box::pin(async move {
                let undone = merge::undo(txn, &hasher, id, &actor).await?;
                let out = UndoOut {
                    merge: undone.merge.into(),
                    lead: undone.survivor.into(),
                    restored: undone.restored.into_iter().map(Into::into).collect(),
                };
                Reply::tagged(StatusCode::OK, &out)
            })
        })
        .await
}
