//! leadpipe's HTTP edge and command line.
//!
//! - `http/`: the plumbing every endpoint shares (state, auth, bodies,
//!   limits, correlation ids, idempotency, errors, metrics);
//! - `routes/`: one module per resource, `routes/ops/` for operating the
//!   pipeline;
//! - `openapi/`: the OpenAPI document built from the routes;
//! - `cli/`: the `leadpipe` command, one module per command group;
//! - `startup`: `Application::build`, wiring the above into a server.

pub mod cli;
pub mod config;
pub mod http;
pub mod openapi;
pub mod routes;
pub mod startup;
pub mod storage;
pub mod telemetry;
pub mod wire;
