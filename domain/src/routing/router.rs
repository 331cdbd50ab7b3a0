//! What the lead drain asks routing, once per batch: the pool a lead is
//! routed in (its turn counter's key and its turn order).

use crate::entities::lead;
use crate::error::Error;
use crate::routing::choice::{Candidate, sales_staff};
use sea_orm::ConnectionTrait;

/// The turn counter of the pool of every active sales principal.
pub const SALES_POOL: &str = "sales";

/// Routing's view for a batch of leads: the staff as they were when the
/// batch began (a change commits on its own and sends waiting leads back).
#[derive(Debug, Clone, Default)]
pub struct Router {
    staff: Vec<Candidate>,
}

/// The principals a lead is routed among, in turn order.
#[derive(Debug, Clone)]
pub struct Pool<'a> {
    /// The `assignment_cursor` row whose turns this pool takes.
    pub key: String,
    pub order: Vec<&'a Candidate>,
}

impl Router {
    pub async fn load<C: ConnectionTrait>(conn: &C) -> Result<Self, Error> {
        Ok(Self {
            staff: sales_staff(conn).await?,
        })
    }

    /// The pool `lead` is routed in.
    pub fn pool_for(&self, _lead: &lead::Model) -> Pool<'_> {
        Pool {
            key: SALES_POOL.to_owned(),
            order: self.staff.iter().collect(),
        }
    }
}
