//! sea-orm entities, one file per table. The schema itself lives in `migration`.

pub mod activity;
pub mod inbox_event;
pub mod lead;
pub mod outbox_event;
pub mod principal;
pub mod source;
