//! Imports and reconcile runs run in the background: a test waits for
//! one to end.

use std::time::Duration;

use serde_json::Value;

use crate::{TestApp, eventually};

/// How long an import or a run of a test's size may take.
const RUN_WAIT: Duration = Duration::from_secs(30);

impl TestApp {
    /// Polls `GET location` (an import or a reconcile run) as `token` until
    /// it is no longer `running`; returns it as it ended.
    pub async fn run_ended(&self, token: &str, location: &str) -> Value {
        eventually(&format!("{location} to end"), RUN_WAIT, async || {
            let response = self.get(token, location).await;
            assert_eq!(response.status(), 200, "GET {location}");
            let run: Value = response.json().await.unwrap();
            if run["state"] == "running" {
                Err(run.to_string())
            } else {
                Ok(run)
            }
        })
        .await
    }

    /// [`run_ended`](Self::run_ended) for the reconcile run with this id.
    pub async fn reconcile_run_ended(&self, token: &str, id: impl std::fmt::Display) -> Value {
        self.run_ended(token, &format!("/api/ops/reconcile-runs/{id}"))
            .await
    }
}
