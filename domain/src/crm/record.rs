//! What contacts, companies and deals share: found by id, matched or created
//! through a unique key, changed only by a compare-and-set on `version`, and
//! listed a keyset page at a time.

use sea_orm::sea_query::{Expr, ExprTrait, InsertStatement};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, QueryFilter, QuerySelect,
    Select, SqlErr, Value,
};

use crate::entities::{company, contact, deal, task};
use crate::error::Error;
use crate::page::{self, KeyColumns, Keyed, Page, Window};
use crate::precondition::IfMatch;

/// How many times a write re-reads and retries after losing a
/// compare-and-set on `version` to a concurrent writer (no If-Match given).
const CAS_ROUNDS: usize = 3;

/// A table of versioned CRM records.
pub(super) trait Table: EntityTrait<Model: Keyed + Send + Sync> {
    const ID: Self::Column;
    const VERSION: Self::Column;
    const CREATED_AT: Self::Column;
    const UPDATED_AT: Self::Column;

    fn version(model: &Self::Model) -> i64;
}

macro_rules! table {
    ($($entity:ident),*) => {$(
        impl Table for $entity::Entity {
            const ID: $entity::Column = $entity::Column::Id;
            const VERSION: $entity::Column = $entity::Column::Version;
            const CREATED_AT: $entity::Column = $entity::Column::CreatedAt;
            const UPDATED_AT: $entity::Column = $entity::Column::UpdatedAt;

            fn version(model: &$entity::Model) -> i64 {
                model.version
            }
        }
    )*};
}
table!(company, contact, deal, task);

/// A record found by its match key, or created.
#[derive(Debug, Clone)]
pub struct Matched<T> {
    pub model: T,
    pub created: bool,
}

pub(super) async fn find<E: Table, C: ConnectionTrait>(
    conn: &C,
    id: i64,
) -> Result<E::Model, Error> {
    E::find()
        .filter(E::ID.eq(id))
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// Runs `insert` (`.. ON CONFLICT (key) DO NOTHING RETURNING *`) and answers
/// the new row, or the one holding `value` in `key` when the insert lost:
/// concurrent callers converge on one record.
pub(super) async fn insert_or_find<E: Table, C: ConnectionTrait>(
    conn: &C,
    insert: &InsertStatement,
    key: E::Column,
    value: Value,
) -> Result<Matched<E::Model>, Error> {
    let stmt = crate::store::statement(conn, insert);
    if let Some(created) = E::Model::find_by_statement(stmt).one(conn).await? {
        return Ok(Matched {
            model: created,
            created: true,
        });
    }
    // Locked like every record a write answers with: an erasure blanking a
    // contact waits for this write, then finds its stored reply.
    let existing = E::find()
        .filter(key.eq(value))
        .lock_exclusive()
        .one(conn)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("a matched record vanished during upsert".into()))?;
    Ok(Matched {
        model: existing,
        created: false,
    })
}

/// What a compare-and-set did.
pub(super) enum Changed<M> {
    /// Nothing to change: the record as it is.
    No(M),
    Yes {
        before: M,
        after: M,
    },
}

/// `UPDATE … SET version = version + 1, updated_at = now, <sets> WHERE id = ?
/// AND version = ?`: the compare-and-set every human write goes through.
/// `sets` says what to change given the current record (nothing: no write);
/// a lost race re-reads and asks again, up to `CAS_ROUNDS` times.
pub(super) async fn change<E: Table, C: ConnectionTrait>(
    conn: &C,
    id: i64,
    if_match: &IfMatch,
    mut sets: impl FnMut(&E::Model) -> Result<Vec<(E::Column, Value)>, Error>,
) -> Result<Changed<E::Model>, Error> {
    for _ in 0..CAS_ROUNDS {
        let current = find::<E, _>(conn, id).await?;
        let version = E::version(&current);
        if_match.check(version)?;
        let sets = sets(&current)?;
        if sets.is_empty() {
            return Ok(Changed::No(current));
        }
        let mut update = E::update_many()
            .col_expr(E::VERSION, Expr::col(E::VERSION).add(1))
            .col_expr(E::UPDATED_AT, Expr::val(crate::clock::now()));
        for (col, value) in sets {
            update = update.col_expr(col, Expr::val(value));
        }
        let rows = update
            .filter(E::ID.eq(id))
            .filter(E::VERSION.eq(version))
            .exec_with_returning(conn)
            .await?;
        if let Some(after) = rows.into_iter().next() {
            return Ok(Changed::Yes {
                before: current,
                after,
            });
        }
    }
    let current = find::<E, _>(conn, id).await?;
    Err(Error::PreconditionFailed {
        current: E::version(&current),
    })
}

/// What a patch changes: the columns to set, and their names for the timeline.
pub(super) struct Sets<Col> {
    pub(super) values: Vec<(Col, Value)>,
    pub(super) fields: Vec<&'static str>,
}

impl<Col> Sets<Col> {
    pub(super) fn new() -> Self {
        Self {
            values: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Sets `col` when a value is given and differs from `stored`.
    pub(super) fn changed<V>(
        &mut self,
        (col, field): (Col, &'static str),
        value: Option<&V>,
        stored: &V,
    ) -> &mut Self
    where
        V: PartialEq + Clone + Into<Value>,
    {
        if let Some(value) = value
            && value != stored
        {
            self.values.push((col, value.clone().into()));
            self.fields.push(field);
        }
        self
    }
}

/// A unique key violated by a change becomes `409` with `message`.
pub(super) fn taken(message: &'static str) -> impl FnOnce(Error) -> Error {
    move |e| match e {
        Error::Db(db) if matches!(db.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            Error::Conflict(message.into())
        }
        other => other,
    }
}

/// A page of `query`, newest first by the window's sort key.
pub(super) async fn list<E: Table, C: ConnectionTrait>(
    conn: &C,
    query: Select<E>,
    window: &Window,
) -> Result<Page<E::Model>, Error> {
    let columns = KeyColumns {
        id: E::ID,
        created_at: E::CREATED_AT,
        updated_at: E::UPDATED_AT,
    };
    page::fetch(conn, query, columns, window).await
}
