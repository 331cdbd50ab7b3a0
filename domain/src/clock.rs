//! The current time at the precision both backends store (microseconds), so a
//! value read back equals the value written and keyset cursors compare exactly.

use chrono::{DateTime, SubsecRound, Utc};

pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}
