//! `/api/tasks`: follow-up tasks on leads, contacts and deals. A task has no
//! natural key, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use chrono::FixedOffset;
use domain::auth::Role;
use domain::crm::task::{self, Due, SubjectType, TaskFilter};

use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::list::ListParams;
use crate::http::params::{IdempotencyKey, IdempotencyKeyRequired, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::tasks::{Filter, TaskIn, TaskOut, TaskPatch};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(patch);
}

crate::http::list::listed! {
    "A page of tasks, soonest due first." pub type TaskPage = Page<TaskOut>;
}

/// Create an `open` follow-up task on a lead, contact or deal.
///
/// A task has no natural key, so `Idempotency-Key` is required. The owner
/// defaults to the caller when a `sales` principal (else `owner_id` is
/// required); it must be an active `sales` principal. Writes the record's
/// timeline (`task_created`) and the outbox event `task.created`.
#[utoipa::path(
    operation_id = "create_task",
    tag = "crm",
    params(IdempotencyKeyRequired),
    request_body(content = TaskIn, example = json!({"subject_type": "lead", "subject_id": 118, "title": "Send the quote for 40 vans", "description": "Pricing from the fleet sheet", "owner_id": 7, "due_at": "2026-12-04T16:00:00Z"})),
    responses(
        (status = 201, description = "The new task", body = TaskOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::task())),
        (status = 422, description = "`/problems/validation`: no such record, an empty title, or an owner who is not an active sales principal"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/tasks")]
async fn create(caller: Caller<SalesUp>, write: Write<TaskIn>) -> WriteResult {
    let author = caller.actor();
    let write = write.read().await?.try_map(|mut input| {
        if input.owner_id.is_none() {
            if caller.role != Role::Sales {
                return Err(ApiError::invalid(
                    "owner_id",
                    "is required (an active sales principal)",
                ));
            }
            input.owner_id = Some(caller.id);
        }
        Ok(input)
    })?;
    write
        .run(&caller, KeyRule::Required, move |txn, input, _| {
            Box::pin(async move {
                let task = task::create(txn, input, &author).await?;
                let location = format!("/api/tasks/{}", task.id);
                Ok(Reply::tagged(StatusCode::CREATED, &TaskOut::from(task))?.location(location))
            })
        })
        .await
}

/// One task.
#[utoipa::path(
    operation_id = "get_task",
    tag = "crm",
    params(("id" = i64, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The task", body = TaskOut, headers(("ETag" = String)), example = json!(examples::task())),
        (status = 404, description = "`/problems/not-found`: no such task"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/tasks/{id}")]
async fn get(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let task = task::find(&state.db, id.into_inner().0).await?;
    Ok(ok_tagged(&TaskOut::from(task)))
}

/// Change a task, complete it (`"status": "done"`) or reopen it (`"open"`).
///
/// Completing writes the timeline (`task_completed`) and the outbox event
/// `task.completed`, and records who completed it and when.
#[utoipa::path(
    operation_id = "patch_task",
    tag = "crm",
    params(("id" = i64, Path, description = "The task's id"), IdempotencyKey, IfMatch),
    request_body(content = TaskPatch, example = json!({"status": "done"})),
    responses(
        (status = 200, description = "The task after the change", body = TaskOut, headers(("ETag" = String)), example = json!(examples::task_done())),
        (status = 404, description = "`/problems/not-found`: no such task"),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names another version"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/tasks/{id}")]
async fn patch(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<TaskPatch>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let task = task::update(txn, id, input, &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &TaskOut::from(task))
            })
        })
        .await
}

/// List tasks, soonest due first.
///
/// `owner=me&due=today` is a rep's day: open tasks due on the caller's
/// calendar day (`utc_offset` says where it starts). `due=overdue` is open
/// and past due, `due=upcoming` due after today.
#[utoipa::path(
    operation_id = "list_tasks",
    tag = "crm",
    params(Filter, ListParams),
    responses((status = 200, description = "A page of tasks", body = TaskPage, example = json!(examples::task_page()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/tasks")]
async fn list(
    caller: Caller<SalesUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let params = filter.into_inner();
    let page = page.into_inner();
    let filter = TaskFilter {
        owner_id: super::owner_filter(params.owner.as_deref(), caller.id)?,
        status: parsed("status", params.status.as_deref())?,
        due: parsed::<Due>("due", params.due.as_deref())?,
        utc_offset: params
            .utc_offset
            .as_deref()
            .map(|o| {
                o.parse::<FixedOffset>()
                    .map_err(|_| ApiError::invalid("utc_offset", "must be like +01:00 or -05:00"))
            })
            .transpose()?,
        subject: subject(&params)?,
    };
    let page = task::list(
        state.reads.db(),
        &filter,
        page.limit(),
        page.cursor.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(page.map(TaskOut::from)))
}

fn parsed<T: std::str::FromStr<Err = &'static str>>(
    field: &str,
    value: Option<&str>,
) -> Result<Option<T>, ApiError> {
    value
        .map(|v| v.parse::<T>().map_err(|e| ApiError::invalid(field, e)))
        .transpose()
}

/// At most one of `lead_id`, `contact_id` and `deal_id`.
fn subject(params: &Filter) -> Result<Option<(SubjectType, i64)>, ApiError> {
    let given: Vec<(SubjectType, i64)> = [
        params.lead_id.map(|id| (SubjectType::Lead, id)),
        params.contact_id.map(|id| (SubjectType::Contact, id)),
        params.deal_id.map(|id| (SubjectType::Deal, id)),
    ]
    .into_iter()
    .flatten()
    .collect();
    match given.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        _ => Err(ApiError::invalid(
            "lead_id",
            "give at most one of lead_id, contact_id and deal_id",
        )),
    }
}
