//! `/api/contacts`: matched by normalised email. A contact without an email
//! cannot be matched, so creating one requires an `Idempotency-Key`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use actix_web::{get, patch, post};
use domain::crm::contact::{self, ContactFilter, ContactInput, ContactPatch};
use domain::crm::timeline::Subject;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::wire::Contact;
use super::{MatchOutcome, matched};
use crate::http::auth::{Caller, SalesUp};
use crate::http::body::present;
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply, ok_tagged};
use crate::http::list::{ListParams, Page, WindowParams};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::path_id::PathId;
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::routes::Routes;
use crate::wire::about::About;
use crate::wire::versioned::Versioned;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(patch)
        .service(activities);
}

/// A contact; after a create, with what the create did.
#[derive(Serialize, ToSchema)]
struct ContactOut {
    #[serde(flatten)]
    contact: Contact,
    /// Only in the answer to `POST /api/contacts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<MatchOutcome>,
}

impl From<domain::entities::contact::Model> for ContactOut {
    fn from(contact: domain::entities::contact::Model) -> Self {
        Self {
            contact: contact.into(),
            outcome: None,
        }
    }
}

impl About for ContactOut {
    fn subjects(&self) -> Vec<domain::idempotency::Subject> {
        self.contact.subjects()
    }
}

impl Versioned for ContactOut {
    fn version(&self) -> i64 {
        self.contact.version
    }
}

/// A contact to match (by email) or create; needs an email, a name or a phone.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ContactIn {
    /// Trimmed and lower-cased; the contact's match key.
    email: Option<String>,
    name: Option<String>,
    phone: Option<String>,
    company_id: Option<i64>,
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
    request_body = ContactIn,
    responses(
        (status = 201, description = "Created (`outcome: created`)", body = ContactOut,
            headers(("Location" = String), ("ETag" = String))),
        (status = 200, description = "An existing contact matched (`outcome: matched`), unchanged", body = ContactOut,
            headers(("Location" = String), ("ETag" = String))),
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
        (status = 200, description = "The contact", body = ContactOut, headers(("ETag" = String))),
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

/// Fields to change; absent fields stay as they are, `null` clears one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ContactPatch)]
struct PatchIn {
    /// An email another contact has is `409`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    email: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    phone: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    company_id: Option<Option<i64>>,
}

impl From<PatchIn> for ContactPatch {
    fn from(input: PatchIn) -> Self {
        Self {
            email: input.email,
            name: input.name,
            phone: input.phone,
            company_id: input.company_id,
        }
    }
}

/// Change a contact.
#[utoipa::path(
    operation_id = "patch_contact",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), IdempotencyKey, IfMatch),
    request_body = PatchIn,
    responses(
        (status = 200, description = "The contact after the change", body = ContactOut, headers(("ETag" = String))),
        (status = 404, description = "`/problems/not-found`: no such contact"),
        (status = 409, description = "`/problems/conflict`: another contact has this email"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[patch("/api/contacts/{id}")]
async fn patch(
    caller: Caller<SalesUp>,
    id: web::Path<PathId>,
    write: Write<PatchIn>,
) -> WriteResult {
    let (id, author) = (id.into_inner().0, caller.actor());
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let contact = contact::update(txn, id, input.into(), &if_match, &author).await?;
                Reply::tagged(StatusCode::OK, &ContactOut::from(contact))
            })
        })
        .await
}

#[derive(Deserialize, IntoParams)]
struct Filter {
    /// Case-insensitive text in name or email.
    q: Option<String>,
    /// Only the contact with this (normalised) email.
    email: Option<String>,
    /// Only contacts of this company.
    company_id: Option<i64>,
}

/// List contacts, newest first.
#[utoipa::path(
    operation_id = "list_contacts",
    tag = "crm",
    params(Filter, WindowParams, ListParams),
    responses((status = 200, description = "A page of contacts", body = super::ContactPage)),
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
    Ok(HttpResponse::Ok().json(Page::from(page).map(Contact::from)))
}

/// A contact's timeline, newest first.
#[utoipa::path(
    operation_id = "list_contact_activities",
    tag = "crm",
    params(("id" = i64, Path, description = "The contact's id"), ListParams),
    responses(
        (status = 200, description = "A page of the timeline", body = super::CrmActivityPage),
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
