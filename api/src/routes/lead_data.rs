//! A person's data: erasure (`DELETE /api/leads/{id}`), lifting a tombstone,
//! the subject access export (`GET /api/leads/{id}/export`) and the bulk
//! export (`GET /api/leads/export`). The rules live in `domain::lead`
//! (`erasure`, `tombstone`, `export`).

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use actix_web::{delete, get};
use chrono::Utc;
use domain::erasure::{self, EraseRequest};
use domain::lead::export::{self, BulkExport, Format};
use domain::lead::tombstone;

use crate::http::auth::{AdminOnly, Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::list::WindowParams;
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::deliveries::{OutboxDeliveryOut, OutboxEventOut};
use crate::wire::inbox::InboxEventOut;
use crate::wire::lead_data::{
    DuplicateOut, EraseParams, ErasureOut, FormatParam, ImportRowOut, SubjectExportOut,
};
use crate::wire::leads::{ActivityOut, LeadConversionOut};
use crate::wire::leads::{Filter, LeadOut};
use crate::wire::reconcile::ReconcileRejectedOut;

/// Registered before `leads::configure`: the literal `/api/leads/export`
/// must win over `/api/leads/{id}`.
pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(bulk_export);
    cfg.service(erase_lead);
    cfg.service(subject_export);
    cfg.service(lift_tombstone);
}

/// Erase a lead and everything stored about it, and bury its natural key.
///
/// In one transaction: deletes the lead, its timeline and notes, its outbox
/// events and deliveries, its import rows, stored idempotent responses that
/// contain it, its duplicate hints and conversion record; empties the raw
/// body and headers of its inbox events; unlinks deals; with
/// `include_contact=true` also blanks the converted contact's name, email and
/// phone and deletes its timeline. Leaves a **tombstone** (a keyed hash of
/// `(source, source_ref)`): every later arrival of that key through any door
/// is answered `suppressed` and creates nothing. Emits `lead.erased` (payload:
/// `lead_id`, `key_hash`) to subscriptions. Writes an audit record without
/// personal data.
///
/// Idempotent: erasing an erased lead answers `200` with the first erasure's
/// record and `repeated: true`, so a retried request sees the same success.
#[utoipa::path(
    operation_id = "erase_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id"), EraseParams),
    responses(
        (status = 200, description = "Erased (now or earlier)", body = ErasureOut, example = json!(examples::erasure())),
        (status = 404, description = "`/problems/not-found`: no such lead, and none erased under this id"),
        (status = 422, description = "`/problems/validation`: no `reason`"),
    ),
    security(("bearer" = ["admin"])),
)]
#[delete("/api/leads/{id}")]
async fn erase_lead(
    caller: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    params: web::Query<EraseParams>,
) -> Result<HttpResponse, ApiError> {
    let params = params.into_inner();
    let request = EraseRequest {
        lead_id: id.into_inner().0,
        reason: params.reason.unwrap_or_default(),
        include_contact: params.include_contact,
        erased_by: Some(caller.id),
        correlation_id: Some(caller.correlation.0.clone()),
    };
    let done = erasure::erase(&state.db, &request).await?;
    Ok(HttpResponse::Ok().json(ErasureOut {
        erasure: done.audit.into(),
        repeated: done.repeated,
    }))
}

/// Lift a tombstone: the next arrival of that natural key creates a lead again.
///
/// `key_hash` is the erasure record's `key_hash` (or `leadpipe lead
/// unsuppress --source S --source-ref R`, which computes it).
#[utoipa::path(
    operation_id = "lift_tombstone",
    tag = "leads",
    params(("key_hash" = String, Path, description = "The tombstone's key hash")),
    responses(
        (status = 204, description = "Lifted"),
        (status = 404, description = "`/problems/not-found`: no such tombstone"),
    ),
    security(("bearer" = ["admin"])),
)]
#[delete("/api/tombstones/{key_hash}")]
async fn lift_tombstone(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    key_hash: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if tombstone::lift(&state.db, &key_hash).await? {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::NotFound("no tombstone with this key hash".into()))
    }
}

/// Everything stored about one lead, as one JSON document (subject access).
///
/// It includes raw webhook bodies and delivery records.
#[utoipa::path(
    operation_id = "export_lead",
    tag = "leads",
    params(("id" = i64, Path, description = "The lead's id")),
    responses(
        (status = 200, description = "The lead's data", body = SubjectExportOut, example = json!(examples::subject_export())),
        (status = 404, description = "`/problems/not-found`: no such lead"),
    ),
    security(("bearer" = ["admin"])),
)]
#[get("/api/leads/{id}/export")]
async fn subject_export(
    _: Caller<AdminOnly>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let s = export::subject(&state.db, state.db.hasher(), id.into_inner().0).await?;
    Ok(HttpResponse::Ok().json(export_out(s, Utc::now())))
}

fn export_out(s: export::Subject, exported_at: chrono::DateTime<Utc>) -> SubjectExportOut {
    SubjectExportOut {
        lead: LeadOut::from(s.lead),
        timeline: s.timeline.into_iter().map(ActivityOut::from).collect(),
        inbox_events: s
            .inbox_events
            .into_iter()
            .map(InboxEventOut::detail)
            .collect(),
        reconcile_rejected: s
            .reconcile_rejected
            .into_iter()
            .map(ReconcileRejectedOut::from)
            .collect(),
        outbox_events: s
            .outbox_events
            .into_iter()
            .map(OutboxEventOut::from)
            .collect(),
        deliveries: s
            .deliveries
            .into_iter()
            .map(OutboxDeliveryOut::from)
            .collect(),
        import_rows: s
            .import_rows
            .into_iter()
            .map(|r| ImportRowOut {
                run_id: r.run_id,
                row_number: r.row_number,
                line: r.line,
                source_ref: r.source_ref,
                outcome: r.outcome,
                reason: r.reason,
            })
            .collect(),
        possible_duplicates: s
            .duplicates
            .into_iter()
            .map(|d| DuplicateOut {
                other_lead_id: d.other_lead_id,
                reason: d.reason,
                created_at: d.created_at,
            })
            .collect(),
        conversion: s.conversion.map(LeadConversionOut::from),
        contact: s.contact.map(Into::into),
        tasks: s.tasks.into_iter().map(Into::into).collect(),
        merged_leads: s
            .merged
            .into_iter()
            .map(|m| export_out(m, exported_at))
            .collect(),
        exported_at,
    }
}

/// Every lead the list filters match, streamed as CSV or NDJSON.
///
/// Takes the filters of `GET /api/leads` (`limit` and `cursor` are ignored:
/// the export walks every page). The body is streamed (chunked), one page
/// of leads at a time, so memory stays flat whatever the count. CSV columns:
/// `id, source, source_ref, email, phone, name, company, status, owner_id,
/// version, source_updated_at, created_at, updated_at`; a text cell starting
/// with `=`, `+`, `-` or `@` gets a leading `'`. NDJSON: one `Lead` per line.
#[utoipa::path(
    operation_id = "export_leads",
    tag = "leads",
    params(FormatParam, Filter, WindowParams),
    responses(
        (status = 200, description = "The leads", content(
            (String = "text/csv"),
            (String = "application/x-ndjson"),
        )),
        (status = 422, description = "`/problems/validation`: a bad filter or format"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/leads/export")]
async fn bulk_export(
    caller: Caller<SalesUp>,
    state: web::Data<AppState>,
    format: web::Query<FormatParam>,
    filter: web::Query<Filter>,
    window: web::Query<WindowParams>,
) -> Result<HttpResponse, ApiError> {
    let filter = filter.into_inner().parse(caller.id, &window)?;
    let format: Format = format
        .format
        .as_deref()
        .unwrap_or("csv")
        .parse()
        .map_err(|e: String| ApiError::invalid("format", e))?;
    let pages = BulkExport::new(state.reads.db().clone(), filter, format);
    let body = futures::stream::try_unfold(pages, |mut pages| async move {
        match pages.next_chunk().await {
            Ok(Some(chunk)) => Ok(Some((web::Bytes::from(chunk), pages))),
            Ok(None) => Ok(None),
            Err(err) => {
                // Headers are sent: the client sees a cut-off body.
                tracing::error!(error = %err, "bulk export failed mid-stream");
                Err(ApiError::from(err))
            }
        }
    });
    let extension = match format {
        Format::Csv => "csv",
        Format::Ndjson => "ndjson",
    };
    Ok(HttpResponse::Ok()
        .content_type(format.content_type())
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"leads.{extension}\""),
        ))
        .streaming(body))
}
