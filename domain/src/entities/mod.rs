//! sea-orm entities, one file per table. The schema itself lives in `migration`.

pub mod activity;
pub mod assignment_cursor;
pub mod company;
pub mod contact;
pub mod crm_activity;
pub mod deal;
pub mod idempotency_key;
pub mod idempotency_subject;
pub mod import_applied_row;
pub mod import_row;
pub mod import_run;
pub mod inbox_event;
pub mod lead;
pub mod lead_conversion;
pub mod lead_duplicate;
pub mod lead_erasure;
pub mod lead_processing_failure;
pub mod lead_tombstone;
pub mod outbox_delivery;
pub mod outbox_event;
pub mod principal;
pub mod reconcile_rejected;
pub mod reconcile_run;
pub mod sealing_key_check;
pub mod source;
pub mod subscription;
