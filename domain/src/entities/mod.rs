//! sea-orm entities, one file per table. The schema itself lives in `migration`.

pub mod activity;
pub mod assignment_cursor;
pub mod idempotency_key;
pub mod inbox_event;
pub mod lead;
pub mod lead_duplicate;
pub mod outbox_delivery;
pub mod outbox_event;
pub mod principal;
pub mod subscription;
// CRM depth and bulk import (issue 10).
pub mod company;
pub mod contact;
pub mod crm_activity;
pub mod deal;
pub mod import_applied_row;
pub mod import_row;
pub mod import_run;
pub mod lead_conversion;
// Reconcile (issue 5).
pub mod reconcile_run;
pub mod source;
