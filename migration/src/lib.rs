//! leadpipe's schema. Every migration runs unchanged on SQLite and PostgreSQL,
//! and inside a transaction (see `in_transaction!`) so that on SQLite no pooled
//! connection can cache a half-built schema (SQLite migrations otherwise run
//! outside a transaction, and a pooled connection keeps the schema it saw).

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_create_principal;
mod m20261130_000002_create_lead;
mod m20261130_000003_create_activity;
mod m20261130_000004_create_outbox_event;
mod m20261130_000101_create_source;
mod m20261130_000102_create_inbox_event;
mod m20261130_000201_create_idempotency_key;
mod m20261130_000301_create_subscription;
mod m20261130_000302_create_outbox_delivery;
mod m20261130_000303_create_lead_processing;
mod m20261130_000401_create_company;
mod m20261130_000402_create_contact;
mod m20261130_000403_create_deal;
mod m20261130_000404_create_lead_conversion;
mod m20261130_000405_create_crm_activity;
mod m20261130_000406_create_import;
mod m20261130_000501_create_reconcile;
mod m20261201_000601_inbox_body_hash;
// Per-lead delivery order by outbox event.
mod m20261201_000620_outbox_event_order_indexes;
// Sealed subscription secrets need a longer column.
mod m20261201_000610_widen_subscription_secret;
mod m20261201_000710_inbox_unfinished_index;
mod m20261201_000730_create_erasure;
mod m20261201_000740_create_reconcile_rejected;
mod m20261201_000750_subscription_secret_rotation;
mod m20261201_000760_inbox_processed_at_index;
mod m20261201_000810_natural_key_hash;
mod m20261201_000830_lead_processing_failure;
mod m20261201_000840_outbox_delivery_unsettled_index;
mod m20261206_000900_idempotency_subject;
mod m20261206_000910_source_version;
mod m20261206_000913_tombstone_folded_hash;
mod m20261206_000920_sealing_key_check;
mod m20261206_000930_create_task;
mod m20261207_000940_lead_merge;
mod m20261207_000950_principal_routing;
mod m20261207_000960_lead_awaiting_owner;
mod m20261207_000970_routing_rules;
mod m20261207_000980_speed_to_lead;
mod m20261207_000990_users_and_sessions;
mod m20261207_001000_api_tokens;
mod m20261207_001010_source_state;
mod m20261207_001020_subscription_failing_since;
mod m20261207_001030_subscription_rate_limit;
mod m20261207_001040_source_expected_interval;
mod m20261207_001050_reconcile_run_heartbeat_index;
mod m20261207_001060_source_batches;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_create_principal::Migration),
            Box::new(m20261130_000002_create_lead::Migration),
            Box::new(m20261130_000003_create_activity::Migration),
            Box::new(m20261130_000004_create_outbox_event::Migration),
            Box::new(m20261130_000101_create_source::Migration),
            Box::new(m20261130_000102_create_inbox_event::Migration),
            Box::new(m20261130_000201_create_idempotency_key::Migration),
            Box::new(m20261130_000301_create_subscription::Migration),
            Box::new(m20261130_000302_create_outbox_delivery::Migration),
            Box::new(m20261130_000303_create_lead_processing::Migration),
            Box::new(m20261130_000401_create_company::Migration),
            Box::new(m20261130_000402_create_contact::Migration),
            Box::new(m20261130_000403_create_deal::Migration),
            Box::new(m20261130_000404_create_lead_conversion::Migration),
            Box::new(m20261130_000405_create_crm_activity::Migration),
            Box::new(m20261130_000406_create_import::Migration),
            Box::new(m20261130_000501_create_reconcile::Migration),
            Box::new(m20261201_000601_inbox_body_hash::Migration),
            Box::new(m20261201_000620_outbox_event_order_indexes::Migration),
            Box::new(m20261201_000610_widen_subscription_secret::Migration),
            Box::new(m20261201_000710_inbox_unfinished_index::Migration),
            Box::new(m20261201_000730_create_erasure::Migration),
            Box::new(m20261201_000740_create_reconcile_rejected::Migration),
            Box::new(m20261201_000750_subscription_secret_rotation::Migration),
            Box::new(m20261201_000760_inbox_processed_at_index::Migration),
            Box::new(m20261201_000810_natural_key_hash::Migration),
            Box::new(m20261201_000830_lead_processing_failure::Migration),
            Box::new(m20261201_000840_outbox_delivery_unsettled_index::Migration),
            Box::new(m20261206_000900_idempotency_subject::Migration),
            Box::new(m20261206_000910_source_version::Migration),
            Box::new(m20261206_000913_tombstone_folded_hash::Migration),
            Box::new(m20261206_000920_sealing_key_check::Migration),
            Box::new(m20261206_000930_create_task::Migration),
            Box::new(m20261207_000940_lead_merge::Migration),
            Box::new(m20261207_000950_principal_routing::Migration),
            Box::new(m20261207_000960_lead_awaiting_owner::Migration),
            Box::new(m20261207_000970_routing_rules::Migration),
            Box::new(m20261207_000980_speed_to_lead::Migration),
            Box::new(m20261207_000990_users_and_sessions::Migration),
            Box::new(m20261207_001000_api_tokens::Migration),
            Box::new(m20261207_001010_source_state::Migration),
            Box::new(m20261207_001020_subscription_failing_since::Migration),
            Box::new(m20261207_001030_subscription_rate_limit::Migration),
            Box::new(m20261207_001040_source_expected_interval::Migration),
            Box::new(m20261207_001050_reconcile_run_heartbeat_index::Migration),
            Box::new(m20261207_001060_source_batches::Migration),
        ]
    }
}
