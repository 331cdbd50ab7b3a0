//! leadpipe's HTTP edge and command line.

pub mod auth;
pub mod body;
pub mod body_limit;
pub mod cli;
pub mod config;
pub mod correlation;
pub mod demo;
pub mod error;
pub mod idempotency;
pub mod import_cmd;
pub mod metrics;
pub mod rate_limit;
pub mod reconcile_cmd;
pub mod routes;
pub mod spool;
pub mod startup;
pub mod storage;
pub mod subscription_cli;
pub mod telemetry;
pub mod webhook_cli;
pub mod worker_config;
