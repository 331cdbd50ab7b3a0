//! Outbound subscriptions through the API, as an admin would create them.

use serde_json::{Value, json};

use crate::TestApp;
use crate::receiver::Receiver;

impl TestApp {
    /// `POST /api/subscriptions` with `body`, as `token`.
    pub async fn create_subscription(&self, token: &str, body: &Value) -> reqwest::Response {
        self.post_json(token, "/api/subscriptions", body).await
    }

    /// Subscribes `receiver` to `event_types` (`[]`: all of them) as
    /// `admin`, and gives it the new signing secret so that it checks our
    /// signatures. Returns the created subscription.
    pub async fn subscribe(&self, admin: &str, receiver: &Receiver, event_types: Value) -> Value {
        let response = self
            .create_subscription(
                admin,
                &json!({"url": receiver.url, "event_types": event_types}),
            )
            .await;
        assert_eq!(response.status(), 201, "subscribing {}", receiver.url);
        let body: Value = response.json().await.unwrap();
        receiver.set_secret(body["secret"].as_str().unwrap());
        body
    }
}
