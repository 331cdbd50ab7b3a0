//! End-to-end tests, one module per concern, in one test binary: each
//! binary links the whole dependency tree, so one binary builds and links
//! once instead of forty times.
//!
//! Run one module with `cargo test -p leadpipe-tests --test it openapi::`.

mod batched_schemes;
mod claim_limits;
mod command_line;
mod configuration;
mod connection_recovery;
mod crm;
mod delivery_order;
mod erasure;
mod erasure_scrub;
mod export;
mod front_page;
mod group_commit;
mod import;
mod import_abandoned;
mod inbox_batching;
mod inbox_processing;
mod inbox_show;
mod intake;
mod json_numbers;
mod lead_failures_ops;
mod lead_jobs;
mod lead_routing;
mod lifecycle;
mod listener;
mod lost_webhooks;
mod merges;
mod metrics_contract;
mod migrations;
mod nul_bytes;
mod observability;
mod openapi;
mod ops_series;
mod outbox;
mod pooler;
mod read_replica;
mod reconcile;
mod reconcile_cli;
mod replays_and_time;
mod retention_counts;
mod routing;
mod sales;
mod secrets;
mod security;
mod sessions;
mod source_lifecycle;
mod source_update;
mod sources_and_ops;
mod speed_to_lead;
mod ssrf;
mod subscription_health;
mod subscriptions_parity;
mod tasks;
mod tokens;
mod webhooks;
mod worker_metrics;
mod write_turn;
