//! Contacts, companies and deals (`/api/contacts`, `/api/companies`,
//! `/api/deals`) and lead conversion (`/api/leads/{id}/convert`), with the
//! same list, cursor, ETag/If-Match and Idempotency-Key conventions as
//! `/api/leads`.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use domain::FieldError;
use domain::crm::timeline::{self, Author, Subject};
use domain::entities::crm_activity;
use domain::page::{self, SortKey, Window};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::auth::Authenticated;
use crate::http::correlation::CorrelationId;
use crate::http::error::ApiError;
use crate::http::idempotency::Reply;
use crate::http::state::AppState;

mod companies;
mod contacts;
mod convert;
mod deals;

/// Registered before `/api/leads`' scope, which would otherwise claim
/// `/api/leads/{id}/convert` and answer 404.
pub fn configure(cfg: &mut web::ServiceConfig) {
    convert::configure(cfg);
    contacts::configure(cfg);
    companies::configure(cfg);
    deals::configure(cfg);
}

/// The OpenAPI paths of contacts, companies, deals and conversion.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    let mut doc = convert::Api::openapi();
    doc.merge(contacts::Api::openapi());
    doc.merge(companies::Api::openapi());
    doc.merge(deals::Api::openapi());
    doc
}

fn author(caller: &Authenticated, correlation: CorrelationId) -> Author {
    Author {
        principal_id: Some(caller.id),
        correlation_id: Some(correlation.0),
    }
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Validation(vec![FieldError::new(field, message)])
}

fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// A record with its `ETag`.
fn tagged<T: Serialize>(status: StatusCode, body: &T, version: i64) -> Result<Reply, ApiError> {
    Ok(Reply::new(status, body)?.etag(etag(version)))
}

fn get_tagged<T: Serialize>(body: &T, version: i64) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::ETAG, etag(version)))
        .json(body)
}

/// `null` and absent are different things in a PATCH.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Whether a match-or-create found an existing record (`200`) or made one (`201`).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum MatchOutcome {
    Created,
    Matched,
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

/// The list parameters every collection shares.
fn window(
    updated_since: Option<&str>,
    sort: Option<&str>,
    limit: Option<u64>,
    cursor: Option<String>,
) -> Result<Window, ApiError> {
    let updated_since = updated_since
        .map(|t| {
            DateTime::parse_from_rfc3339(t)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| invalid("updated_since", "must be an RFC 3339 timestamp"))
        })
        .transpose()?;
    let sort = match sort {
        None | Some("updated_at") => SortKey::UpdatedAt,
        Some("created_at") => SortKey::CreatedAt,
        Some(_) => return Err(invalid("sort", "must be 'updated_at' or 'created_at'")),
    };
    Ok(Window {
        updated_since,
        sort,
        limit: page::clamp_limit(limit),
        cursor,
    })
}

#[derive(Deserialize, IntoParams)]
struct PageParams {
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of a contact's, company's or deal's timeline.
#[derive(Serialize, ToSchema)]
#[schema(as = CrmActivityPage)]
struct ActivityPage {
    data: Vec<crm_activity::Model>,
    next_cursor: Option<String>,
}

async fn timeline_page(
    state: &AppState,
    subject: Subject,
    id: i64,
    params: &PageParams,
) -> Result<HttpResponse, ApiError> {
    let page = timeline::list(
        state.reads.db(),
        subject,
        id,
        page::clamp_limit(params.limit),
        params.cursor.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(ActivityPage {
        data: page.data,
        next_cursor: page.next_cursor,
    }))
}
