//! What `ingest` would answer for a page, without writing: the dry run's
//! comparison, by the same rules as the write path (tombstones, content
//! hash, staleness).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::entities::lead;
use crate::lead::ingest::Outcome;
use crate::lead::record::NewLead;
use crate::lead::tombstone;

/// The stored content a key would have after the records before it.
struct Known {
    hash: String,
    source_updated_at: Option<DateTime<Utc>>,
}

/// Predicts each record's outcome in order; a key that repeats within the
/// page sees what its earlier record would have written.
pub async fn predict<C: ConnectionTrait>(
    conn: &C,
    hasher: &crate::natural_key::KeyHasher,
    source: &str,
    news: &[NewLead],
) -> Result<Vec<Outcome>, crate::Error> {
    let mut known: HashMap<String, Known> = if news.is_empty() {
        HashMap::new()
    } else {
        lead::Entity::find()
            .filter(lead::Column::Source.eq(source))
            .filter(lead::Column::SourceRef.is_in(news.iter().map(|n| n.source_ref.as_str())))
            .all(conn)
            .await?
            .into_iter()
            .map(|l| {
                (
                    l.source_ref,
                    Known {
                        hash: l.content_hash,
                        source_updated_at: l.source_updated_at,
                    },
                )
            })
            .collect()
    };
    // As the write path would: an erased key is answered before anything else.
    let buried = tombstone::suppressed(
        conn,
        hasher,
        news.iter()
            .map(|n| (n.source.as_str(), n.source_ref.as_str())),
    )
    .await?;
    Ok(news
        .iter()
        .map(|new| {
            if buried.contains(&(new.source.clone(), new.source_ref.clone())) {
                return Outcome::Suppressed;
            }
            let outcome = outcome(new, known.get(&new.source_ref));
            if outcome.changed() {
                let previous = known.get(&new.source_ref).and_then(|k| k.source_updated_at);
                known.insert(
                    new.source_ref.clone(),
                    Known {
                        hash: new.content_hash(),
                        source_updated_at: new.source_updated_at.or(previous),
                    },
                );
            }
            outcome
        })
        .collect())
}

fn outcome(new: &NewLead, stored: Option<&Known>) -> Outcome {
    let Some(stored) = stored else {
        return Outcome::Created;
    };
    let older = matches!(
        (new.source_updated_at, stored.source_updated_at),
        (Some(incoming), Some(stored)) if incoming < stored
    );
    if new.content_hash() != stored.hash && !older {
        Outcome::Updated
    } else if older {
        Outcome::Stale
    } else {
        Outcome::Unchanged
    }
}
