//! `/api/contacts`: matched by normalised email. A contact without an email
//! cannot be matched, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::crm::contact::{self, ContactFilter, ContactInput};
use domain::crm::timeline::Subject;

use super::matched;
use super::wire::Contact;
use crate::http::auth::{Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::list::{ListParams, WindowParams};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::contacts::{ContactIn, ContactOut, ContactPatch, Filter};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(patch)
        .service(activities);
}

/// Create a contact, or find the one with the same email.
///
/// A contact with the same normalised email is answered as it is (`200`,
/// `outcome: matched`). A contact without an email cannot be matched, so
/// creating one requires an `Idempotency-Key`.
#[utoipa::path(
    operation_id = "create_contact",
    tag = "crm",
    params(IdempotencyKey),
    request_body(content = ContactIn, example = json!({"email": "ada.lovelace@acme-logistics.de", "name": "Ada Lovelace", "phone": "+49 30 1234567", "company_id": 12})),
    responses(
        (status = 201, description = "Created (`outcome: created`)", body = ContactOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::contact_created())),
        (status = 200, description = "An existing contact matched (`outcome: matched`), unchanged", body = ContactOut,
            headers(("Location" = String), ("ETag" = String)), example = json!(examples::contact_matched())),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[post("/api/contacts")]
async fn create(caller: Caller<SalesUp>, write: Write<ContactIn>) -> WriteResult {
    let author = caller.actor();
    let write = write.read().await?.try_map(|input| {
        let new = ContactInput {
            email: input.email,
            name: input.name,
            phone: input.phone,
            company_id: input.company_id,
        }
        .validate()?;
        if new.email.is_none() && new.name.is_none() && new.phone.is_none() {
            return Err(ApiError::invalid(
                "email",
                "a contact needs an email, a name or a phone",
            ));
        }
        Ok(new)
    })?;
    // Without an email nothing can match a retry: the key must.
    let rule = if write.input.email.is_some() {
        KeyRule::Optional
    } else {
        KeyRule::Required
    };
    write
        .run(&caller, rule, move |txn, new, _| {
            Box::pin(async move {
                let found = contact::match_or_create(txn, &new, &author).await?;
                matched(found, "/api/contacts", |contact, outcome| ContactOut {
                    contact: contact.into(),
                    outcome,
                })
            })
        })
        .await
}

/// One contact.
#[utoipa::path(
    operation_id = "get_contact",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id")),
    responses(
        (status = 200, description = "The contact", body = ContactOut, headers(("ETag" = String)), example = json!(examples::contact())),
        (status = 404, description = "`/problems/not-found`: no such contact"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/contacts/{id}")]
async fn get(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
) -> Result<HttpResponse, ApiError> {
    let contact = contact::find(&state.db, id.into_inner().0).await?;
    Ok(ok_tagged(&ContactOut::from(contact)))
}

/// Change a contact.
#[utoipa::path(
    operation_id = "patch_contact",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), IdempotencyKey, IfMatch),
    request_body(content = ContactPatch, example = json!({"phone": "+49 30 7654321"})),
    responses(
        (status = 200, description = "The contact after the change", body = ContactOut, headers(("ETag" = String)), example = json!(examples::contact_changed())),
        (status = 404, description = "`/problems/not-found`: no such contact"),
        (status = 409, description = "`/problems/conflict`: another contact has this email"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/contacts/{id}")]
async fn patch(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<ContactPatch>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let contact = contact::update(txn, id, input, &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &ContactOut::from(contact))
            })
        })
        .await
}

/// List contacts, newest first.
#[utoipa::path(
    operation_id = "list_contacts",
    tag = "crm",
    params(Filter, WindowParams, ListParams),
    responses((status = 200, description = "A page of contacts", body = super::ContactPage, example = json!(examples::contact_page()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/contacts")]
async fn list(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
    window: web::Query<WindowParams>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let window = page.into_inner().window(&window)?;
    let Filter {
        q,
        email,
        company_id,
    } = filter.into_inner();
    let filter = ContactFilter {
        q,
        email,
        company_id,
    };
    let page = contact::list(state.reads.db(), &filter, &window).await?;
    Ok(HttpResponse::Ok().json(page.map(Contact::from)))
}

/// A contact's timeline, newest first.
#[utoipa::path(
    operation_id = "list_contact_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), ListParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::CrmActivityPage, example = json!(examples::contact_activity_page())),
        (status = 404, description = "`/problems/not-found`: no such contact"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/contacts/{id}/activities")]
async fn activities(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    id: web::Path<PathId>,
    page: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().0;
    contact::find(&state.db, id).await?;
    super::timeline_page(&state, Subject::Contact, id, page.into_inner()).await
}
