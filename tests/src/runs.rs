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

    /// Uploads `csv` as an import (`POST /api/imports?{query}` as `token`,
    /// must be `202`) and returns the run as it ended.
    pub async fn import_over_api(
        &self,
        token: &str,
        query: &str,
        csv: impl Into<reqwest::Body>,
    ) -> Value {
        let response = self.api(token).upload_import(query, "text/csv", csv).await;
        assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        self.run_ended(token, &location).await
    }

    /// Starts a reconcile run of `source` over the API as `ops` (with `body`
    /// if given; must be `202`) and returns the run as it ended.
    pub async fn reconcile_over_api(&self, ops: &str, source: &str, body: Option<&Value>) -> Value {
        let started = self.api(ops).start_reconcile(source, body).await;
        assert_eq!(started.status(), 202);
        let id = started.json::<Value>().await.unwrap()["id"].clone();
        self.reconcile_run_ended(ops, id).await
    }

    /// [`run_ended`](Self::run_ended) for the reconcile run with this id.
    pub async fn reconcile_run_ended(&self, token: &str, id: impl std::fmt::Display) -> Value {
        self.run_ended(token, &format!("/api/ops/reconcile-runs/{id}"))
            .await
    }
}
