use sea_orm::entity::prelude::*;

/// A webhook sender's configuration. No `Serialize`: `secrets` must never
/// reach a response or a log line (the API builds what it shows field by field).
#[derive(Clone, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "source")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub scheme: String,
    #[sea_orm(column_type = "JsonBinary")]
    pub secrets: Json,
    pub tolerance_secs: i64,
    pub signature_header: Option<String>,
    pub event_id_header: Option<String>,
    pub event_id_pointer: Option<String>,
    pub event_type_header: Option<String>,
    pub event_type_pointer: Option<String>,
    #[sea_orm(column_type = "JsonBinary", nullable)]
    pub allowed_event_types: Option<Json>,
    pub record_pointer: String,
    pub source_ref_pointer: String,
    pub email_pointer: Option<String>,
    pub name_pointer: Option<String>,
    pub phone_pointer: Option<String>,
    pub company_pointer: Option<String>,
    pub updated_at_pointer: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    // Reconcile: the sender's pull API (see `crate::reconcile::PullConfig`).
    pub pull_url: Option<String>,
    pub pull_auth_header: Option<String>,
    /// Write-only, as `secrets`.
    pub pull_auth_secret: Option<String>,
    pub pull_page_size: i64,
    pub reconcile_cron: Option<String>,
    pub reconcile_cursor: Option<String>,
    /// How often the source usually delivers, in seconds, when configured
    /// (else learned: `ops::rhythm`).
    pub expected_interval_secs: Option<i64>,
    /// Where a delivery's events sit when it carries several: a JSON
    /// pointer whose `*` segments stand for every element of an array.
    pub events_pointer: Option<String>,
    /// Write-only, as `secrets`: the token a subscription handshake must
    /// name (`meta-lead-ads`).
    pub verify_token: Option<String>,
    /// The configuration's version, its `ETag`: every change moves it (the
    /// reconcile cursor and a re-sealing of the secrets do not).
    pub version: i64,
    /// `active`, `paused` or `removed` ([`crate::inbound::source::SourceState`]).
    pub state: String,
}

// Hand-written so the secrets never reach logs through `{:?}`.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("source::Model")
            .field("name", &self.name)
            .field("scheme", &self.scheme)
            .field("secrets", &"[redacted]")
            .finish_non_exhaustive()
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
