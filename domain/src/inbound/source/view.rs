//! A source as the API and CLI show it. Secrets are write-only, so the view
//! carries everything but them: only their count, and whether a pull auth
//! value is set.

use chrono::Utc;
use sea_orm::DbErr;
use serde::Serialize;

use super::allowed_types;
use crate::entities::source;

/// A source's configuration as the API and CLI show it: everything but the
/// secrets, of which only the count is shown.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Source)]
pub struct SourceView {
    pub name: String,
    pub scheme: String,
    pub secret_count: usize,
    pub tolerance_secs: i64,
    pub signature_header: Option<String>,
    pub event_id_header: Option<String>,
    pub event_id_pointer: Option<String>,
    pub event_type_header: Option<String>,
    pub event_type_pointer: Option<String>,
    pub allowed_event_types: Vec<String>,
    pub record_pointer: String,
    pub source_ref_pointer: String,
    pub email_pointer: Option<String>,
    pub name_pointer: Option<String>,
    pub phone_pointer: Option<String>,
    pub company_pointer: Option<String>,
    pub updated_at_pointer: Option<String>,
    pub created_at: chrono::DateTime<Utc>,
    pub updated_at: chrono::DateTime<Utc>,
    // Reconcile. The auth value is write-only: only whether one is set shows.
    pub pull_url: Option<String>,
    pub pull_auth_header: Option<String>,
    pub pull_auth_configured: bool,
    pub pull_page_size: i64,
    pub cron: Option<String>,
    /// Where the next reconcile run continues (`null`: from the start).
    pub reconcile_cursor: Option<String>,
}

pub(super) fn view(model: &source::Model) -> Result<SourceView, DbErr> {
    let secret_count = model.secrets.as_array().map_or(0, Vec::len);
    Ok(SourceView {
        name: model.name.clone(),
        scheme: model.scheme.clone(),
        secret_count,
        tolerance_secs: model.tolerance_secs,
        signature_header: model.signature_header.clone(),
        event_id_header: model.event_id_header.clone(),
        event_id_pointer: model.event_id_pointer.clone(),
        event_type_header: model.event_type_header.clone(),
        event_type_pointer: model.event_type_pointer.clone(),
        allowed_event_types: allowed_types(model),
        record_pointer: model.record_pointer.clone(),
        source_ref_pointer: model.source_ref_pointer.clone(),
        email_pointer: model.email_pointer.clone(),
        name_pointer: model.name_pointer.clone(),
        phone_pointer: model.phone_pointer.clone(),
        company_pointer: model.company_pointer.clone(),
        updated_at_pointer: model.updated_at_pointer.clone(),
        created_at: model.created_at,
        updated_at: model.updated_at,
        pull_url: model.pull_url.clone(),
        pull_auth_header: model.pull_auth_header.clone(),
        pull_auth_configured: model.pull_auth_secret.is_some(),
        pull_page_size: model.pull_page_size,
        cron: model.reconcile_cron.clone(),
        reconcile_cursor: model.reconcile_cursor.clone(),
    })
}
