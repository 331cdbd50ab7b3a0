//! The intake door's policy (`POST /api/leads`): who may post a record for
//! which source, when a post must carry an `Idempotency-Key`, and how a
//! post without one is written — with the other keyless posts of the
//! moment in a shared transaction when the server runs a group committer,
//! else in a transaction of its own. (A keyed post is written in the
//! transaction that also stores its answer for replay: the HTTP side's.)

use crate::Error;
use crate::actor::Actor;
use crate::auth::{Principal, Role};
use crate::lead::group_commit::GroupCommitter;
use crate::lead::ingest::{self, Ingested, Origin};
use crate::lead::record::LeadRecord;
use crate::store::Store;

/// The source of leads sales staff enter by hand.
pub const MANUAL_SOURCE: &str = "manual";

/// Whether a post must carry an `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyNeed {
    Optional,
    /// The server assigned the record's `source_ref`: only the key makes a
    /// retry the same lead.
    Required,
}

/// Checks that `principal` may post `record`: an intake token for its own
/// source, sales staff for [`MANUAL_SOURCE`] only, an admin for any. A
/// sales record without a `source_ref` is given one (`man_…`), and its
/// post then needs a key.
pub fn admit(principal: &Principal, record: &mut LeadRecord) -> Result<KeyNeed, Error> {
    let source = record.source.trim();
    if principal.role == Role::Sales {
        if source != MANUAL_SOURCE {
            return Err(Error::Forbidden(format!(
                "sales staff may only create leads with source '{MANUAL_SOURCE}'"
            )));
        }
        if record
            .source_ref
            .as_deref()
            .is_none_or(|r| r.trim().is_empty())
        {
            record.source_ref = Some(format!("man_{}", uuid::Uuid::now_v7().simple()));
            return Ok(KeyNeed::Required);
        }
        return Ok(KeyNeed::Optional);
    }
    if !principal.may_ingest_for(source) {
        return Err(Error::Forbidden(format!(
            "this token may not post leads for source '{source}'"
        )));
    }
    Ok(KeyNeed::Optional)
}

/// Writes a post that carries no key: through `group` when the server runs
/// one (concurrent posts share transactions), else alone.
pub async fn submit(
    store: &Store,
    group: Option<&GroupCommitter>,
    record: LeadRecord,
    actor: Actor,
) -> Result<Ingested, Error> {
    match group {
        Some(group) => group.ingest(record, Origin::Api, actor).await,
        None => ingest::ingest(store, record, Origin::Api, &actor).await,
    }
}
