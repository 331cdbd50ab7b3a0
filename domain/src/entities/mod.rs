//! sea-orm entities, one file per table. The schema itself lives in `migration`.

pub mod activity;
pub mod assignment_cursor;
pub mod idempotency_key;
pub mod lead;
pub mod lead_duplicate;
pub mod outbox_delivery;
pub mod outbox_event;
pub mod principal;
pub mod subscription;
