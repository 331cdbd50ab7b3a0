//! Merging leads into one, and undoing it. A merged lead keeps its row, its
//! key and its own values, marked `merged_into_id`: its key becomes an alias
//! of the survivor ([`super::alias`]), reads are redirected and writes
//! refused. What moved to the survivor (timeline, tasks, deals, conversion,
//! duplicate hints) is recorded by id in the merge, so an undo moves exactly
//! that back and nothing the survivor gained since.

use std::collections::{BTreeMap, HashMap, HashSet};

use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::actor::Actor;
use crate::clock;
use crate::entities::{
    activity as activity_entity, deal, lead, lead_conversion, lead_duplicate, lead_merge, task,
};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lifecycle::lead_status::LeadStatus;
use crate::natural_key::KeyHasher;
use crate::outbound::{events, outbox};
use crate::precondition::IfMatch;

/// The most leads one request merges into a survivor.
pub const MAX_MERGED: usize = 50;

/// The fields a merge decides, as the lead's JSON names them: the sender's
/// four, then the two people own.
pub const FIELDS: [&str; 6] = ["email", "phone", "name", "company", "status", "owner_id"];

#[derive(Debug, Clone, Default)]
pub struct MergeRequest {
    pub lead_ids: Vec<i64>,
    /// Per field, the lead whose value to keep.
    pub fields: BTreeMap<String, i64>,
}

/// Why the survivor has a field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The most recently updated lead that has a value (sender's fields).
    Latest,
    /// The request named the lead.
    Chosen,
    /// The survivor's own (people's fields, or no lead had a value).
    Survivor,
    /// `converted`, because a conversion moved to the survivor.
    Conversion,
}

/// Where one kept value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Provenance {
    pub lead_id: i64,
    pub source: String,
    pub rule: Rule,
}

/// The values a merge decides, as they were or became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Values {
    email: Option<String>,
    phone: Option<String>,
    name: Option<String>,
    company: Option<String>,
    status: LeadStatus,
    owner_id: Option<i64>,
}

impl Values {
    fn of(lead: &lead::Model) -> Self {
        Self {
            email: lead.email.clone(),
            phone: lead.phone.clone(),
            name: lead.name.clone(),
            company: lead.company.clone(),
            status: lead.status,
            owner_id: lead.owner_id,
        }
    }

    fn text(&self, field: &str) -> Option<&String> {
        match field {
            "email" => self.email.as_ref(),
            "phone" => self.phone.as_ref(),
            "name" => self.name.as_ref(),
            "company" => self.company.as_ref(),
            _ => None,
        }
    }

    /// The survivor's columns these values are written to.
    fn columns(&self) -> [(lead::Column, sea_orm::sea_query::SimpleExpr); 6] {
        [
            (lead::Column::Email, Expr::val(self.email.clone())),
            (lead::Column::Phone, Expr::val(self.phone.clone())),
            (lead::Column::Name, Expr::val(self.name.clone())),
            (lead::Column::Company, Expr::val(self.company.clone())),
            (lead::Column::Status, Expr::val(self.status.as_str())),
            (lead::Column::OwnerId, Expr::val(self.owner_id)),
        ]
    }

    fn set_text(&mut self, field: &str, value: Option<String>) {
        match field {
            "email" => self.email = value,
            "phone" => self.phone = value,
            "name" => self.name = value,
            "company" => self.company = value,
            _ => {}
        }
    }
}

/// A lead's speed-to-lead clock, as a merge finds and leaves it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Clock {
    assigned_at: Option<chrono::DateTime<chrono::Utc>>,
    first_response_at: Option<chrono::DateTime<chrono::Utc>>,
    response_due_at: Option<chrono::DateTime<chrono::Utc>>,
    response_breached_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Clock {
    fn of(lead: &lead::Model) -> Self {
        Self {
            assigned_at: lead.assigned_at,
            first_response_at: lead.first_response_at,
            response_due_at: lead.response_due_at,
            response_breached_at: lead.response_breached_at,
        }
    }

    fn columns(&self) -> [(lead::Column, sea_orm::sea_query::SimpleExpr); 4] {
        [
            (lead::Column::AssignedAt, Expr::val(self.assigned_at)),
            (
                lead::Column::FirstResponseAt,
                Expr::val(self.first_response_at),
            ),
            (lead::Column::ResponseDueAt, Expr::val(self.response_due_at)),
            (
                lead::Column::ResponseBreachedAt,
                Expr::val(self.response_breached_at),
            ),
        ]
    }
}

/// A duplicate hint as stored, to be put back by an undo.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hint {
    lead_id: i64,
    other_lead_id: i64,
    reason: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

/// What an undo puts back (the merge's `moved` column).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Moved {
    /// Per merged lead, the ids of its timeline rows, tasks and deals.
    activities: BTreeMap<i64, Vec<i64>>,
    tasks: BTreeMap<i64, Vec<i64>>,
    deals: BTreeMap<i64, Vec<i64>>,
    /// The merged lead whose conversion moved to the survivor.
    conversion_from: Option<i64>,
    hints_removed: Vec<Hint>,
    hints_added: Vec<(i64, i64)>,
    survivor_before: Option<Values>,
    survivor_after: Option<Values>,
    #[serde(default)]
    clock_before: Option<Clock>,
    #[serde(default)]
    clock_after: Option<Clock>,
    /// The survivor was erased: this merge holds nothing any more.
    #[serde(default)]
    erased: bool,
}

/// A merge and the survivor after it.
#[derive(Debug, Clone)]
pub struct Merged {
    pub merge: lead_merge::Model,
    pub survivor: lead::Model,
}

/// An undone merge, the survivor and the leads given back.
#[derive(Debug, Clone)]
pub struct Undone {
    pub merge: lead_merge::Model,
    pub survivor: lead::Model,
    pub restored: Vec<lead::Model>,
}

/// Checks a request before anything is read: ids distinct, not the
/// survivor, at most [`MAX_MERGED`]; field names known, winners among the
/// leads.
fn validate(survivor_id: i64, request: &MergeRequest) -> Result<(), Error> {
    if request.lead_ids.is_empty() || request.lead_ids.len() > MAX_MERGED {
        return Err(Error::invalid(
            "lead_ids",
            &format!("must name 1 to {MAX_MERGED} leads to merge into this one"),
        ));
    }
    let distinct: HashSet<i64> = request.lead_ids.iter().copied().collect();
    if distinct.len() != request.lead_ids.len() {
        return Err(Error::invalid("lead_ids", "names a lead twice"));
    }
    if distinct.contains(&survivor_id) {
        return Err(Error::invalid(
            "lead_ids",
            "names the lead merged into (the one in the path)",
        ));
    }
    for (field, from) in &request.fields {
        if !FIELDS.contains(&field.as_str()) {
            return Err(Error::invalid(
                &format!("fields.{field}"),
                &format!("is not a field a merge decides ({})", FIELDS.join(", ")),
            ));
        }
        if *from != survivor_id && !distinct.contains(from) {
            return Err(Error::invalid(
                &format!("fields.{field}"),
                "must name the survivor or one of lead_ids",
            ));
        }
    }
    Ok(())
}

/// Merges `request.lead_ids` into `survivor_id` on the caller's transaction.
pub async fn merge<C: ConnectionTrait>(
    txn: &C,
    survivor_id: i64,
    request: &MergeRequest,
    if_match: &IfMatch,
    actor: &Actor,
) -> Result<Merged, Error> {
    validate(survivor_id, request)?;
    // Locked in id order: two merges over the same leads queue up instead
    // of deadlocking, and the second finds what the first did.
    let mut ids: Vec<i64> = request.lead_ids.clone();
    ids.push(survivor_id);
    ids.sort_unstable();
    let mut leads: HashMap<i64, lead::Model> = HashMap::with_capacity(ids.len());
    for id in ids {
        let Some(lead) = lead::Entity::find_by_id(id)
            .lock_exclusive()
            .one(txn)
            .await?
        else {
            if id == survivor_id {
                return Err(Error::NotFound);
            }
            return Err(Error::invalid(
                "lead_ids",
                &format!("lead {id} does not exist"),
            ));
        };
        if let Some(into) = lead.merged_into_id {
            return Err(Error::LeadMerged {
                lead_id: id,
                survivor_id: into,
            });
        }
        leads.insert(id, lead);
    }
    let survivor = leads
        .get(&survivor_id)
        .ok_or_else(|| DbErr::Custom("the survivor was locked and is gone".into()))?
        .clone();
    if_match.check(survivor.version)?;
    let merged: Vec<&lead::Model> = request
        .lead_ids
        .iter()
        .filter_map(|id| leads.get(id))
        .collect();
    let merged_ids = request.lead_ids.clone();

    let conversions = lead_conversion::Entity::find()
        .filter(lead_conversion::Column::LeadId.is_in(leads.keys().copied()))
        .all(txn)
        .await?;
    if conversions.len() > 1 {
        let names: Vec<String> = conversions.iter().map(|c| c.lead_id.to_string()).collect();
        return Err(Error::Conflict(format!(
            "leads {} were each converted: a lead keeps one conversion, so they cannot be merged",
            names.join(" and ")
        )));
    }
    let conversion_from = conversions
        .first()
        .map(|c| c.lead_id)
        .filter(|id| *id != survivor_id);

    // The survivor first, then the merged leads as asked: ties go that way.
    let order: Vec<&lead::Model> = std::iter::once(&survivor)
        .chain(merged.iter().copied())
        .collect();
    let before = Values::of(&survivor);
    let mut after = before.clone();
    let mut fields: BTreeMap<String, Provenance> = BTreeMap::new();
    let provenance = |lead: &lead::Model, rule| Provenance {
        lead_id: lead.id,
        source: lead.source.clone(),
        rule,
    };
    for field in &FIELDS[..4] {
        let (from, rule) = match request.fields.get(*field) {
            Some(id) => (leads.get(id).unwrap_or(&survivor), Rule::Chosen),
            None => {
                let latest = order
                    .iter()
                    .filter(|l| Values::of(l).text(field).is_some())
                    .fold(None::<&lead::Model>, |best, l| match best {
                        Some(b) if freshness(b) >= freshness(l) => Some(b),
                        _ => Some(l),
                    });
                match latest {
                    Some(lead) => (lead, Rule::Latest),
                    None => (&survivor, Rule::Survivor),
                }
            }
        };
        after.set_text(field, Values::of(from).text(field).cloned());
        fields.insert((*field).to_owned(), provenance(from, rule));
    }
    let (status_from, status_rule) = match request.fields.get("status") {
        Some(id) => (leads.get(id).unwrap_or(&survivor), Rule::Chosen),
        None => match conversion_from.and_then(|id| leads.get(&id)) {
            Some(converted) => (converted, Rule::Conversion),
            None => (&survivor, Rule::Survivor),
        },
    };
    after.status = status_from.status;
    // A conversion is what makes a lead `converted`, so the survivor is
    // converted exactly when one of the leads was.
    let converted = !conversions.is_empty();
    if converted != (after.status == LeadStatus::Converted) {
        return Err(Error::invalid(
            "fields.status",
            if converted {
                "one of the leads was converted, so the survivor's status stays 'converted'"
            } else {
                "'converted' comes only with a conversion, and none of these leads has one"
            },
        ));
    }
    fields.insert("status".into(), provenance(status_from, status_rule));
    let (owner_from, owner_rule) = match request.fields.get("owner_id") {
        Some(id) => (leads.get(id).unwrap_or(&survivor), Rule::Chosen),
        None => (&survivor, Rule::Survivor),
    };
    after.owner_id = owner_from.owner_id;
    fields.insert("owner_id".into(), provenance(owner_from, owner_rule));

    let now = clock::now();
    // The clock of the one lead they are now: first owned and first
    // answered of them all, a breach any of them had; a new owner of an
    // unanswered lead gets a due time of its own.
    let earliest = |of: fn(&lead::Model) -> Option<chrono::DateTime<chrono::Utc>>| {
        order.iter().filter_map(|l| of(l)).min()
    };
    let clock_before = Clock::of(&survivor);
    let mut clock_after = Clock {
        assigned_at: earliest(|l| l.assigned_at),
        first_response_at: earliest(|l| l.first_response_at),
        response_due_at: survivor.response_due_at,
        response_breached_at: earliest(|l| l.response_breached_at),
    };
    if clock_after.first_response_at.is_none() && after.owner_id != survivor.owner_id {
        clock_after.response_due_at =
            crate::lead::speed_to_lead::clock::due_for(txn, after.owner_id, now).await?;
    }
    let mut moved = Moved {
        conversion_from,
        survivor_before: Some(before),
        survivor_after: Some(after.clone()),
        clock_before: Some(clock_before),
        clock_after: Some(clock_after.clone()),
        ..Moved::default()
    };
    for lead in &merged {
        let activities = ids_where(
            txn,
            activity_entity::Entity::find()
                .select_only()
                .column(activity_entity::Column::Id)
                .filter(activity_entity::Column::LeadId.eq(lead.id)),
        )
        .await?;
        moved.activities.insert(lead.id, activities);
        let tasks = ids_where(
            txn,
            task::Entity::find()
                .select_only()
                .column(task::Column::Id)
                .filter(task::Column::SubjectType.eq("lead"))
                .filter(task::Column::SubjectId.eq(lead.id)),
        )
        .await?;
        moved.tasks.insert(lead.id, tasks);
        let deals = ids_where(
            txn,
            deal::Entity::find()
                .select_only()
                .column(deal::Column::Id)
                .filter(deal::Column::LeadId.eq(lead.id)),
        )
        .await?;
        moved.deals.insert(lead.id, deals);
    }
    activity_entity::Entity::update_many()
        .col_expr(activity_entity::Column::LeadId, Expr::val(survivor_id))
        .filter(activity_entity::Column::LeadId.is_in(merged_ids.iter().copied()))
        .exec(txn)
        .await?;
    task::Entity::update_many()
        .col_expr(task::Column::SubjectId, Expr::val(survivor_id))
        .filter(task::Column::SubjectType.eq("lead"))
        .filter(task::Column::SubjectId.is_in(merged_ids.iter().copied()))
        .exec(txn)
        .await?;
    deal::Entity::update_many()
        .col_expr(deal::Column::LeadId, Expr::val(survivor_id))
        .filter(deal::Column::LeadId.is_in(merged_ids.iter().copied()))
        .exec(txn)
        .await?;
    if let Some(from) = conversion_from {
        lead_conversion::Entity::update_many()
            .col_expr(lead_conversion::Column::LeadId, Expr::val(survivor_id))
            .filter(lead_conversion::Column::LeadId.eq(from))
            .exec(txn)
            .await?;
    }
    move_hints(txn, survivor_id, &merged_ids, &mut moved).await?;

    let survivor = write_survivor(txn, survivor_id, &after, Some(&clock_after), now)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the survivor vanished during its merge".into()))?;
    // A merged lead is never processed or routed again: its key is an
    // alias now.
    crate::routing::waiting::leave(txn, &merged_ids).await?;
    lead::Entity::update_many()
        .col_expr(lead::Column::MergedIntoId, Expr::val(survivor_id))
        .col_expr(
            lead::Column::Version,
            Expr::col(lead::Column::Version).add(1),
        )
        .col_expr(
            lead::Column::ProcessedVersion,
            Expr::col(lead::Column::Version).add(1),
        )
        .col_expr(lead::Column::UpdatedAt, Expr::val(now))
        .filter(lead::Column::Id.is_in(merged_ids.iter().copied()))
        .exec(txn)
        .await?;

    let record = lead_merge::ActiveModel {
        survivor_id: Set(survivor_id),
        merged_ids: Set(to_json(&merged_ids)?),
        merged_by: Set(actor.principal_id),
        merged_at: Set(now),
        fields: Set(to_json(&fields)?),
        moved: Set(to_json(&moved)?),
        undone_at: Set(None),
        undone_by: Set(None),
        ..Default::default()
    }
    .insert(txn)
    .await?;

    activity::record(
        txn,
        NewActivity {
            lead_id: survivor_id,
            kind: ActivityKind::Merged,
            origin: None,
            outcome: None,
            author_id: actor.principal_id,
            detail: Some(
                json!({ "merge_id": record.id, "merged_ids": merged_ids, "fields": fields }),
            ),
            correlation_id: actor.correlation_id.clone(),
        },
    )
    .await?;
    for id in &merged_ids {
        activity::record(
            txn,
            NewActivity {
                lead_id: *id,
                kind: ActivityKind::MergedInto,
                origin: None,
                outcome: None,
                author_id: actor.principal_id,
                detail: Some(json!({ "merge_id": record.id, "survivor_id": survivor_id })),
                correlation_id: actor.correlation_id.clone(),
            },
        )
        .await?;
    }
    let payload = events::LeadMerged {
        merge_id: record.id,
        survivor_id,
        merged_ids,
        version: survivor.version,
    };
    outbox::enqueue_event(
        txn,
        Some(survivor_id),
        &payload,
        actor.correlation_id.clone(),
    )
    .await?;
    // The merged leads no longer count against their owners' capacity.
    crate::routing::waiting::requeue(txn).await?;
    metrics::counter!("leadpipe_lead_merges_total").increment(1);
    Ok(Merged {
        merge: record,
        survivor,
    })
}

/// Writes a merge's (or an undo's) values, and the clock when given, to
/// the survivor, a new version; `None` when it is gone.
async fn write_survivor<C: ConnectionTrait>(
    txn: &C,
    survivor_id: i64,
    values: &Values,
    clock: Option<&Clock>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<lead::Model>, DbErr> {
    let mut update = lead::Entity::update_many();
    for (column, expr) in values
        .columns()
        .into_iter()
        .chain(clock.into_iter().flat_map(Clock::columns))
    {
        update = update.col_expr(column, expr);
    }
    Ok(update
        .col_expr(
            lead::Column::Version,
            Expr::col(lead::Column::Version).add(1),
        )
        .col_expr(lead::Column::UpdatedAt, Expr::val(now))
        .filter(lead::Column::Id.eq(survivor_id))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next())
}

fn to_json<T: Serialize>(value: &T) -> Result<serde_json::Value, DbErr> {
    serde_json::to_value(value).map_err(|e| DbErr::Json(e.to_string()))
}

/// The time a lead's values were last stated: the sender's, else ours.
fn freshness(lead: &lead::Model) -> chrono::DateTime<chrono::Utc> {
    lead.source_updated_at.unwrap_or(lead.updated_at)
}

async fn ids_where<C: ConnectionTrait, E: EntityTrait>(
    txn: &C,
    select: sea_orm::Select<E>,
) -> Result<Vec<i64>, DbErr> {
    select.into_tuple::<i64>().all(txn).await
}

/// Hints between the merged leads and others go to the survivor; hints
/// among the leads merged together go away (they are one lead now). Both
/// recorded for the undo.
async fn move_hints<C: ConnectionTrait>(
    txn: &C,
    survivor_id: i64,
    merged_ids: &[i64],
    moved: &mut Moved,
) -> Result<(), Error> {
    let touching = Condition::any()
        .add(lead_duplicate::Column::LeadId.is_in(merged_ids.iter().copied()))
        .add(lead_duplicate::Column::OtherLeadId.is_in(merged_ids.iter().copied()));
    let removed = lead_duplicate::Entity::find()
        .filter(touching.clone())
        .order_by_asc(lead_duplicate::Column::LeadId)
        .order_by_asc(lead_duplicate::Column::OtherLeadId)
        .all(txn)
        .await?;
    lead_duplicate::Entity::delete_many()
        .filter(touching)
        .exec(txn)
        .await?;
    let merged: HashSet<i64> = merged_ids.iter().copied().collect();
    let to_survivor = |id: i64| {
        if merged.contains(&id) {
            survivor_id
        } else {
            id
        }
    };
    for hint in &removed {
        let (a, b) = (to_survivor(hint.lead_id), to_survivor(hint.other_lead_id));
        if a == b {
            continue;
        }
        let inserted = insert_hint(txn, a, b, &hint.reason, hint.created_at).await?;
        if inserted {
            moved.hints_added.push((a, b));
        }
    }
    moved.hints_removed = removed
        .into_iter()
        .map(|h| Hint {
            lead_id: h.lead_id,
            other_lead_id: h.other_lead_id,
            reason: h.reason,
            created_at: h.created_at,
        })
        .collect();
    Ok(())
}

/// Inserts a hint unless the pair has one; whether it did.
async fn insert_hint<C: ConnectionTrait>(
    txn: &C,
    lead_id: i64,
    other_lead_id: i64,
    reason: &str,
    created_at: chrono::DateTime<chrono::Utc>,
) -> Result<bool, Error> {
    let mut insert = Query::insert();
    insert
        .into_table(lead_duplicate::Entity)
        .columns([
            lead_duplicate::Column::LeadId,
            lead_duplicate::Column::OtherLeadId,
            lead_duplicate::Column::Reason,
            lead_duplicate::Column::CreatedAt,
        ])
        .values([
            lead_id.into(),
            other_lead_id.into(),
            reason.into(),
            created_at.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(
            OnConflict::columns([
                lead_duplicate::Column::LeadId,
                lead_duplicate::Column::OtherLeadId,
            ])
            .do_nothing()
            .to_owned(),
        );
    Ok(txn.execute(&insert).await?.rows_affected() > 0)
}

/// One merge.
pub async fn find_merge<C: ConnectionTrait>(conn: &C, id: i64) -> Result<lead_merge::Model, Error> {
    lead_merge::Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// The leads merged straight into `lead_id` (not those merged into them),
/// oldest first, the first 1,000: what its page names on its timeline.
pub async fn merged_leads<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
) -> Result<Vec<lead::Model>, Error> {
    Ok(lead::Entity::find()
        .filter(lead::Column::MergedIntoId.eq(lead_id))
        .order_by_asc(lead::Column::Id)
        .limit(1_000)
        .all(conn)
        .await?)
}

/// The merge's merged lead ids.
pub fn merged_ids(merge: &lead_merge::Model) -> Vec<i64> {
    serde_json::from_value(merge.merged_ids.clone()).unwrap_or_default()
}

/// Undoes merge `merge_id`: the merged leads come back with their keys and
/// their own values, what moved goes back, and the survivor's values the
/// merge set go back to what they were unless changed since. Refused
/// (`Conflict`, saying why) once undone, after the survivor was erased, or
/// while the survivor is itself merged into another lead.
pub async fn undo<C: ConnectionTrait>(
    txn: &C,
    hasher: &KeyHasher,
    merge_id: i64,
    actor: &Actor,
) -> Result<Undone, Error> {
    // The leads' keys first, exclusively and in one order (as an erasure
    // takes them): a delivery of a merged key, which holds its key's lock
    // and then locks the merged row and the survivor's, finishes before or
    // starts after, never halfway.
    let planned = lead_merge::Entity::find_by_id(merge_id)
        .one(txn)
        .await?
        .ok_or(Error::NotFound)?;
    let mut involved = merged_ids(&planned);
    involved.push(planned.survivor_id);
    let mut key_locks: Vec<String> = lead::Entity::find()
        .filter(lead::Column::Id.is_in(involved))
        .all(txn)
        .await?
        .iter()
        .map(|l| hasher.folded_hash(&l.source, &l.source_ref))
        .collect();
    key_locks.sort_unstable();
    key_locks.dedup();
    for folded in &key_locks {
        crate::lead::tombstone::lock_for_erasure(txn, folded).await?;
    }
    let record = lead_merge::Entity::find_by_id(merge_id)
        .lock_exclusive()
        .one(txn)
        .await?
        .ok_or(Error::NotFound)?;
    if let Some(at) = record.undone_at {
        return Err(Error::Conflict(format!(
            "merge {merge_id} was undone at {}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )));
    }
    let moved: Moved = serde_json::from_value(record.moved.clone())
        .map_err(|e| DbErr::Json(format!("merge {merge_id}'s record: {e}")))?;
    let erased = || {
        Error::Conflict(format!(
            "lead {} (the survivor of merge {merge_id}) was erased, and the merged leads with it: nothing is left to restore",
            record.survivor_id
        ))
    };
    if moved.erased {
        return Err(erased());
    }
    let survivor_id = record.survivor_id;
    let merged = merged_ids(&record);
    let mut ids = merged.clone();
    ids.push(survivor_id);
    ids.sort_unstable();
    let mut leads: HashMap<i64, lead::Model> = HashMap::new();
    for id in ids {
        let Some(lead) = lead::Entity::find_by_id(id)
            .lock_exclusive()
            .one(txn)
            .await?
        else {
            return Err(erased());
        };
        leads.insert(id, lead);
    }
    let survivor = leads.get(&survivor_id).ok_or_else(erased)?.clone();
    if let Some(into) = survivor.merged_into_id {
        return Err(Error::Conflict(format!(
            "lead {survivor_id} (the survivor of merge {merge_id}) was merged into lead {into} since: undo that merge first"
        )));
    }
    let now = clock::now();
    for (lead_id, rows) in &moved.activities {
        for chunk in rows.chunks(CHUNK) {
            activity_entity::Entity::update_many()
                .col_expr(activity_entity::Column::LeadId, Expr::val(*lead_id))
                .filter(activity_entity::Column::Id.is_in(chunk.iter().copied()))
                .filter(activity_entity::Column::LeadId.eq(survivor_id))
                .exec(txn)
                .await?;
        }
    }
    for (lead_id, rows) in &moved.tasks {
        for chunk in rows.chunks(CHUNK) {
            task::Entity::update_many()
                .col_expr(task::Column::SubjectId, Expr::val(*lead_id))
                .filter(task::Column::Id.is_in(chunk.iter().copied()))
                .filter(task::Column::SubjectType.eq("lead"))
                .filter(task::Column::SubjectId.eq(survivor_id))
                .exec(txn)
                .await?;
        }
    }
    for (lead_id, rows) in &moved.deals {
        for chunk in rows.chunks(CHUNK) {
            deal::Entity::update_many()
                .col_expr(deal::Column::LeadId, Expr::val(*lead_id))
                .filter(deal::Column::Id.is_in(chunk.iter().copied()))
                .filter(deal::Column::LeadId.eq(survivor_id))
                .exec(txn)
                .await?;
        }
    }
    if let Some(from) = moved.conversion_from {
        lead_conversion::Entity::update_many()
            .col_expr(lead_conversion::Column::LeadId, Expr::val(from))
            .filter(lead_conversion::Column::LeadId.eq(survivor_id))
            .exec(txn)
            .await?;
    }
    for (a, b) in &moved.hints_added {
        lead_duplicate::Entity::delete_many()
            .filter(lead_duplicate::Column::LeadId.eq(*a))
            .filter(lead_duplicate::Column::OtherLeadId.eq(*b))
            .exec(txn)
            .await?;
    }
    // A hinted lead erased since takes its hints with it.
    let hinted: HashSet<i64> = moved
        .hints_removed
        .iter()
        .flat_map(|h| [h.lead_id, h.other_lead_id])
        .collect();
    let still_there: HashSet<i64> = lead::Entity::find()
        .select_only()
        .column(lead::Column::Id)
        .filter(lead::Column::Id.is_in(hinted))
        .into_tuple::<i64>()
        .all(txn)
        .await?
        .into_iter()
        .collect();
    for hint in moved
        .hints_removed
        .iter()
        .filter(|h| still_there.contains(&h.lead_id) && still_there.contains(&h.other_lead_id))
    {
        insert_hint(
            txn,
            hint.lead_id,
            hint.other_lead_id,
            &hint.reason,
            hint.created_at,
        )
        .await?;
    }

    // The survivor's values go back where the merge's still stand; a value
    // changed since (by its sender or a person) is newer than both.
    let current = Values::of(&survivor);
    let mut restored_values = current.clone();
    if let (Some(before), Some(after)) = (&moved.survivor_before, &moved.survivor_after) {
        for field in &FIELDS[..4] {
            if current.text(field) == after.text(field) {
                restored_values.set_text(field, before.text(field).cloned());
            }
        }
        if current.status == after.status {
            restored_values.status = before.status;
        }
        if current.owner_id == after.owner_id {
            restored_values.owner_id = before.owner_id;
        }
    }
    // The conversion went back with its lead: a survivor left converted
    // without one would be a sale nobody can follow.
    if moved.conversion_from.is_some() && restored_values.status == LeadStatus::Converted {
        restored_values.status = moved
            .survivor_before
            .as_ref()
            .map_or(LeadStatus::Qualified, |b| b.status);
    }
    // The survivor's clock goes back too, unless it moved since.
    let clock_back = match (&moved.clock_before, &moved.clock_after) {
        (Some(before), Some(after)) if Clock::of(&survivor) == *after => Some(before),
        _ => None,
    };
    let survivor = write_survivor(txn, survivor_id, &restored_values, clock_back, now)
        .await?
        .ok_or_else(erased)?;
    // Given back, each lead is processed again: its own values may have
    // changed through its key while it was merged.
    let restored = lead::Entity::update_many()
        .col_expr(lead::Column::MergedIntoId, Expr::val(Option::<i64>::None))
        .col_expr(
            lead::Column::Version,
            Expr::col(lead::Column::Version).add(1),
        )
        .col_expr(lead::Column::UpdatedAt, Expr::val(now))
        .filter(lead::Column::Id.is_in(merged.iter().copied()))
        .exec_with_returning(txn)
        .await?;
    let mut record: lead_merge::ActiveModel = record.into();
    record.undone_at = Set(Some(now));
    record.undone_by = Set(actor.principal_id);
    let record = record.update(txn).await?;

    activity::record(
        txn,
        NewActivity {
            lead_id: survivor_id,
            kind: ActivityKind::Unmerged,
            origin: None,
            outcome: None,
            author_id: actor.principal_id,
            detail: Some(json!({ "merge_id": merge_id, "merged_ids": merged })),
            correlation_id: actor.correlation_id.clone(),
        },
    )
    .await?;
    for id in &merged {
        activity::record(
            txn,
            NewActivity {
                lead_id: *id,
                kind: ActivityKind::Unmerged,
                origin: None,
                outcome: None,
                author_id: actor.principal_id,
                detail: Some(json!({ "merge_id": merge_id, "survivor_id": survivor_id })),
                correlation_id: actor.correlation_id.clone(),
            },
        )
        .await?;
    }
    let payload = events::LeadUnmerged {
        merge_id,
        survivor_id,
        merged_ids: merged.clone(),
        version: survivor.version,
    };
    outbox::enqueue_event(
        txn,
        Some(survivor_id),
        &payload,
        actor.correlation_id.clone(),
    )
    .await?;
    metrics::counter!("leadpipe_lead_unmerges_total").increment(1);
    let mut restored = restored;
    restored.sort_by_key(|l| merged.iter().position(|id| *id == l.id));
    Ok(Undone {
        merge: record,
        survivor,
        restored,
    })
}

/// Ids per `IN (…)` when moving rows back.
const CHUNK: usize = 500;

/// The merges whose survivor is among `lead_ids` lose what they hold of
/// the people erased: field values and rows to move back. They stay, marked,
/// so an undo says why it cannot happen.
pub async fn forget_for_erasure<C: ConnectionTrait>(
    txn: &C,
    lead_ids: &[i64],
) -> Result<u64, Error> {
    let erased = serde_json::to_value(Moved {
        erased: true,
        ..Moved::default()
    })
    .map_err(|e| DbErr::Json(e.to_string()))?;
    // Merges that took one of them away and were undone since hold its
    // values too; merges are few (people make them), so they are read here
    // rather than searched inside JSON in two dialects.
    let erased_ids: HashSet<i64> = lead_ids.iter().copied().collect();
    let others: Vec<(i64, serde_json::Value)> = lead_merge::Entity::find()
        .select_only()
        .column(lead_merge::Column::Id)
        .column(lead_merge::Column::MergedIds)
        .filter(lead_merge::Column::SurvivorId.is_not_in(lead_ids.iter().copied()))
        .into_tuple()
        .all(txn)
        .await?;
    let mut merges: Vec<i64> = others
        .into_iter()
        .filter(|(_, merged)| {
            serde_json::from_value::<Vec<i64>>(merged.clone())
                .unwrap_or_default()
                .iter()
                .any(|id| erased_ids.contains(id))
        })
        .map(|(id, _)| id)
        .collect();
    merges.extend(
        lead_merge::Entity::find()
            .select_only()
            .column(lead_merge::Column::Id)
            .filter(lead_merge::Column::SurvivorId.is_in(lead_ids.iter().copied()))
            .into_tuple::<i64>()
            .all(txn)
            .await?,
    );
    let mut blanked = 0;
    for chunk in merges.chunks(CHUNK) {
        blanked += lead_merge::Entity::update_many()
            .col_expr(lead_merge::Column::Moved, Expr::val(erased.clone()))
            .col_expr(lead_merge::Column::Fields, Expr::val(json!({})))
            .filter(lead_merge::Column::Id.is_in(chunk.iter().copied()))
            .exec(txn)
            .await?
            .rows_affected;
    }
    Ok(blanked)
}

/// The most leads merged into one (directly or not) that an erasure takes
/// with it; past that it refuses rather than leave keys unburied.
const MAX_MERGED_TREE: usize = 100_000;

/// Locks the merges whose survivor is among `lead_ids` (an erasure, before
/// it locks the leads: the order an undo takes them in).
pub async fn lock_merges_of<C: ConnectionTrait>(txn: &C, lead_ids: &[i64]) -> Result<(), Error> {
    lead_merge::Entity::find()
        .select_only()
        .column(lead_merge::Column::Id)
        .filter(lead_merge::Column::SurvivorId.is_in(lead_ids.iter().copied()))
        .order_by_asc(lead_merge::Column::Id)
        .lock_exclusive()
        .into_tuple::<i64>()
        .all(txn)
        .await?;
    Ok(())
}

/// Every lead merged into `lead_id`, and into those, to the end.
pub async fn merged_into<C: ConnectionTrait>(txn: &C, lead_id: i64) -> Result<Vec<i64>, Error> {
    let mut found = Vec::new();
    let mut frontier = vec![lead_id];
    while !frontier.is_empty() {
        if found.len() > MAX_MERGED_TREE {
            return Err(DbErr::Custom(format!(
                "more than {MAX_MERGED_TREE} leads are merged into lead {lead_id}"
            ))
            .into());
        }
        let next: Vec<i64> = lead::Entity::find()
            .select_only()
            .column(lead::Column::Id)
            .filter(lead::Column::MergedIntoId.is_in(frontier))
            .order_by_asc(lead::Column::Id)
            .into_tuple()
            .all(txn)
            .await?;
        found.extend(&next);
        frontier = next;
    }
    Ok(found)
}
