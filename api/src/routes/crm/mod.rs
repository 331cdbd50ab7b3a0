//! Contacts, companies and deals (`/api/contacts`, `/api/companies`,
//! `/api/deals`) and lead conversion (`/api/leads/{id}/convert`), with the
//! same list, cursor, ETag/If-Match and Idempotency-Key conventions as
//! `/api/leads`.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use domain::crm::company::Matched;
use domain::crm::timeline::{self, Subject};
use domain::page::Keyed;
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::idempotency::Reply;
use crate::http::list::{ListParams, listed};
use crate::http::state::AppState;
use crate::routes::Routes;
use crate::wire::about::About;
use crate::wire::versioned::Versioned;

mod companies;
mod contacts;
mod convert;
mod deals;
mod tasks;
use crate::wire::crm as wire;

use crate::wire::crm::MatchOutcome;
pub use wire::Contact;

pub fn configure(cfg: &mut Routes<'_>) {
    convert::configure(cfg);
    contacts::configure(cfg);
    companies::configure(cfg);
    deals::configure(cfg);
    tasks::configure(cfg);
}

impl MatchOutcome {
    fn of(created: bool) -> Self {
        if created {
            Self::Created
        } else {
            Self::Matched
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Self::Created => StatusCode::CREATED,
            Self::Matched => StatusCode::OK,
        }
    }
}

/// The answer to a match-or-create: `201` with `Location` for a new
/// record, `200` for the one that matched.
fn matched<M: Keyed, O: Serialize + Versioned + About>(
    found: Matched<M>,
    collection: &str,
    out: impl FnOnce(M, Option<MatchOutcome>) -> O,
) -> Result<Reply, ApiError> {
    let outcome = MatchOutcome::of(found.created);
    let location = format!("{collection}/{}", found.model.id());
    Ok(Reply::tagged(outcome.status(), &out(found.model, Some(outcome)))?.location(location))
}

listed! {
    "A page of a contact's, company's or deal's timeline."
    type CrmActivityPage = Page<wire::CrmActivity>;
    "A page of companies." type CompanyPage = Page<wire::Company>;
    "A page of contacts." type ContactPage = Page<wire::Contact>;
    "A page of deals." type DealPage = Page<wire::DealOut>;
}

/// The `owner` filter of a list: a principal id, or `me` for the caller.
fn owner_filter(owner: Option<&str>, caller: i64) -> Result<Option<i64>, ApiError> {
    match owner {
        None => Ok(None),
        Some("me") => Ok(Some(caller)),
        Some(id) => id
            .parse()
            .map(Some)
            .map_err(|_| ApiError::invalid("owner", "must be a principal id or 'me'")),
    }
}

async fn timeline_page(
    state: &AppState,
    subject: Subject,
    id: i64,
    params: ListParams,
) -> Result<HttpResponse, ApiError> {
    let page = timeline::list(
        state.reads.db(),
        subject,
        id,
        params.limit(),
        params.cursor.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(page.map(wire::CrmActivity::from)))
}
