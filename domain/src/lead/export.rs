//! Reading out what is stored: everything about one lead (a subject access
//! export), and every lead a list filter matches as CSV or NDJSON, a page at
//! a time so memory stays flat however many leads there are.

use crate::natural_key::KeyHasher;
use crate::store::Store;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};

use crate::entities::{
    activity, contact, import_row, inbox_event, lead, lead_conversion, lead_duplicate,
    outbox_delivery, outbox_event, reconcile_rejected, task,
};
use crate::error::Error;
use crate::lead::query::{self, LeadFilter};
use crate::outbound::events::LeadSnapshot;
use crate::spreadsheet::neutralise;

/// Everything stored about one lead.
#[derive(Debug, Clone)]
pub struct Subject {
    pub lead: lead::Model,
    pub timeline: Vec<activity::Model>,
    pub inbox_events: Vec<inbox_event::Model>,
    /// Pulled records of the key that reconcile could not map.
    pub reconcile_rejected: Vec<reconcile_rejected::Model>,
    pub outbox_events: Vec<outbox_event::Model>,
    pub deliveries: Vec<outbox_delivery::Model>,
    pub import_rows: Vec<import_row::Model>,
    pub duplicates: Vec<lead_duplicate::Model>,
    pub conversion: Option<lead_conversion::Model>,
    pub contact: Option<contact::Model>,
    /// Follow-up tasks on the lead and on the contact it became: their
    /// titles and descriptions are free text about the person.
    pub tasks: Vec<task::Model>,
    /// The leads merged into this one, and into those: the same person's
    /// data under other keys (an erasure of this lead erases them too).
    /// Their own `merged` is empty: the list is flat.
    pub merged: Vec<Subject>,
}

/// Everything stored about `lead_id` and about every lead merged into it.
pub async fn subject<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    lead_id: i64,
) -> Result<Subject, Error> {
    let lead = lead::Entity::find_by_id(lead_id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    let mut found = one_subject(conn, hasher, lead).await?;
    let merged_ids = crate::lead::merge::merged_into(conn, lead_id).await?;
    let merged = lead::Entity::find()
        .filter(lead::Column::Id.is_in(merged_ids))
        .order_by_asc(lead::Column::Id)
        .all(conn)
        .await?;
    for lead in merged {
        found.merged.push(one_subject(conn, hasher, lead).await?);
    }
    Ok(found)
}

async fn one_subject<C: ConnectionTrait>(
    conn: &C,
    hasher: &KeyHasher,
    lead: lead::Model,
) -> Result<Subject, Error> {
    let lead_id = lead.id;
    let timeline = activity::Entity::find()
        .filter(activity::Column::LeadId.eq(lead_id))
        .order_by_asc(activity::Column::Id)
        .all(conn)
        .await?;
    // Also the key's events and pulled records that never made the lead
    // (dead, waiting, rejected): what an erasure would empty.
    let key_hashes = hasher.key_hashes(&lead.source, &lead.source_ref);
    let inbox_events = inbox_event::Entity::find()
        .filter(
            Condition::any()
                .add(inbox_event::Column::LeadId.eq(lead_id))
                .add(inbox_event::Column::KeyHash.is_in(key_hashes.clone())),
        )
        .order_by_asc(inbox_event::Column::Id)
        .all(conn)
        .await?;
    let reconcile_rejected = reconcile_rejected::Entity::find()
        .filter(
            Condition::any()
                .add(reconcile_rejected::Column::LeadId.eq(lead_id))
                .add(reconcile_rejected::Column::KeyHash.is_in(key_hashes)),
        )
        .order_by_asc(reconcile_rejected::Column::Id)
        .all(conn)
        .await?;
    let outbox_events = outbox_event::Entity::find()
        .filter(outbox_event::Column::LeadId.eq(lead_id))
        .order_by_asc(outbox_event::Column::Id)
        .all(conn)
        .await?;
    let deliveries = outbox_delivery::Entity::find()
        .filter(outbox_delivery::Column::LeadId.eq(lead_id))
        .order_by_asc(outbox_delivery::Column::Id)
        .all(conn)
        .await?;
    let import_rows = import_row::Entity::find()
        .filter(import_row::Column::LeadId.eq(lead_id))
        .order_by_asc(import_row::Column::RunId)
        .order_by_asc(import_row::Column::RowNumber)
        .all(conn)
        .await?;
    let duplicates = lead_duplicate::Entity::find()
        .filter(lead_duplicate::Column::LeadId.eq(lead_id))
        .all(conn)
        .await?;
    let conversion = lead_conversion::Entity::find_by_id(lead_id)
        .one(conn)
        .await?;
    let contact = match &conversion {
        Some(c) => contact::Entity::find_by_id(c.contact_id).one(conn).await?,
        None => None,
    };
    let mut about = Condition::any().add(
        Condition::all()
            .add(task::Column::SubjectType.eq("lead"))
            .add(task::Column::SubjectId.eq(lead_id)),
    );
    if let Some(c) = &conversion {
        about = about.add(
            Condition::all()
                .add(task::Column::SubjectType.eq("contact"))
                .add(task::Column::SubjectId.eq(c.contact_id)),
        );
    }
    let tasks = task::Entity::find()
        .filter(about)
        .order_by_asc(task::Column::Id)
        .all(conn)
        .await?;
    Ok(Subject {
        lead,
        timeline,
        inbox_events,
        reconcile_rejected,
        outbox_events,
        deliveries,
        import_rows,
        duplicates,
        conversion,
        contact,
        tasks,
        merged: Vec::new(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Ndjson,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(Self::Csv),
            "ndjson" => Ok(Self::Ndjson),
            _ => Err("must be 'csv' or 'ndjson'".into()),
        }
    }
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Csv => "text/csv; charset=utf-8",
            Self::Ndjson => "application/x-ndjson",
        }
    }
}

/// The CSV columns, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "id",
    "source",
    "source_ref",
    "email",
    "phone",
    "name",
    "company",
    "status",
    "owner_id",
    "version",
    "source_updated_at",
    "created_at",
    "updated_at",
];

/// Leads per page read; one page is all an export holds at a time.
pub const PAGE: u64 = 500;

/// A bulk export in progress: each [`BulkExport::next_chunk`] reads one
/// keyset page of the list and returns its encoded bytes.
pub struct BulkExport {
    db: Store,
    filter: LeadFilter,
    format: Format,
    cursor: Option<String>,
    started: bool,
    done: bool,
}

impl BulkExport {
    pub fn new(db: Store, filter: LeadFilter, format: Format) -> Self {
        Self {
            db,
            filter,
            format,
            cursor: None,
            started: false,
            done: false,
        }
    }

    /// The next page's bytes (the CSV header comes with the first); `None`
    /// when every lead was written.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
        if self.done {
            return Ok(None);
        }
        let page = query::list_leads_by(
            &self.db,
            &self.filter,
            PAGE,
            self.cursor.as_deref(),
            query::Access::Scan,
        )
        .await?;
        let mut out = Vec::with_capacity(page.data.len() * 200 + 200);
        match self.format {
            Format::Csv => {
                let mut writer = csv::Writer::from_writer(&mut out);
                if !self.started {
                    writer.write_record(CSV_COLUMNS).map_err(csv_error)?;
                }
                for lead in &page.data {
                    writer.write_record(csv_row(lead)).map_err(csv_error)?;
                }
                writer
                    .flush()
                    .map_err(|e| Error::Db(sea_orm::DbErr::Custom(e.to_string())))?;
            }
            Format::Ndjson => {
                for lead in &page.data {
                    serde_json::to_writer(&mut out, &LeadSnapshot::from(lead))
                        .map_err(|e| Error::Db(sea_orm::DbErr::Custom(e.to_string())))?;
                    out.push(b'\n');
                }
            }
        }
        self.started = true;
        self.cursor = page.next_cursor;
        self.done = self.cursor.is_none();
        Ok(Some(out))
    }
}

fn csv_error(e: csv::Error) -> Error {
    Error::Db(sea_orm::DbErr::Custom(e.to_string()))
}

/// One lead as a CSV row; text cells a spreadsheet would run as a formula
/// get a leading `'`.
fn csv_row(lead: &lead::Model) -> Vec<String> {
    let text = |v: &Option<String>| {
        v.as_deref()
            .map(|s| neutralise(s).into_owned())
            .unwrap_or_default()
    };
    vec![
        lead.id.to_string(),
        neutralise(&lead.source).into_owned(),
        neutralise(&lead.source_ref).into_owned(),
        text(&lead.email),
        text(&lead.phone),
        text(&lead.name),
        text(&lead.company),
        lead.status.to_string(),
        lead.owner_id.map(|o| o.to_string()).unwrap_or_default(),
        lead.version.to_string(),
        lead.source_updated_at
            .map(|t| t.to_rfc3339())
            .unwrap_or_default(),
        lead.created_at.to_rfc3339(),
        lead.updated_at.to_rfc3339(),
    ]
}
