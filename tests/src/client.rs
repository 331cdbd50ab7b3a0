//! The API as a test calls it: one method per operation, each building its
//! path, token, `Idempotency-Key` and `If-Match` in one place.
//!
//! An answer stays a `reqwest::Response`, so a test still asserts the status,
//! the headers and the problem type it means to; [`Answer::expect_json`]
//! checks the status and reads the body as the server's own answer type
//! (`api::wire`), [`Answer::expect`] as a JSON value (a problem, or a body a
//! test reads as a client without those types would). A body is anything
//! `Serialize`: the server's request types (`api::wire::…::*In`), or
//! `json!` for a body that is wrong on purpose.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use domain::auth::Role;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use api::wire::leads::NoteIn;

use crate::TestApp;
use crate::receiver::Receiver;

/// The API of one app as one principal, the holder of `token`. It holds
/// no borrow of the app, so a test's fixture can keep one per role beside
/// the app.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    address: String,
    pub token: String,
}

impl TestApp {
    /// The API as the principal whose bearer token this is.
    pub fn api(&self, token: &str) -> Api {
        Api {
            client: self.client.clone(),
            address: self.address.clone(),
            token: token.to_owned(),
        }
    }

    /// The API as a new principal with `role` (an intake principal bound to
    /// `source`).
    pub async fn api_as(&self, role: Role, source: Option<&str>) -> Api {
        let token = self.token(role, source).await;
        self.api(&token)
    }
}

/// One request, sent when first polled (awaited, joined); a keyed or
/// conditional write adds its header first (`.key("k")`, `.if_match(3)`).
#[must_use = "a call is sent when awaited"]
pub struct Call {
    request: Option<reqwest::RequestBuilder>,
    sending: Option<Pin<Box<dyn Future<Output = reqwest::Response> + Send>>>,
}

impl Call {
    /// `Idempotency-Key: key`.
    pub fn key(self, key: &str) -> Self {
        self.header("idempotency-key", key)
    }

    /// `If-Match: "version"`, the `ETag` of that version.
    pub fn if_match(self, version: i64) -> Self {
        self.header("if-match", &format!("\"{version}\""))
    }

    pub fn header(self, name: &str, value: &str) -> Self {
        self.map(|request| request.header(name, value))
    }

    fn map(
        mut self,
        change: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Self {
        let request = self
            .request
            .take()
            .expect("a call changed after it was sent");
        self.request = Some(change(request));
        self
    }

    /// `body` as it is, as `content_type`, on a call that has none yet
    /// (`request`): a body that is wrong on purpose, or that a `Value`
    /// could not hold.
    pub fn body(self, content_type: &str, body: impl Into<reqwest::Body>) -> Self {
        self.map(|request| request.header("content-type", content_type).body(body))
    }

    /// A JSON body in place of the one the operation sent.
    pub fn json(self, body: &(impl Serialize + ?Sized)) -> Self {
        self.map(|request| request.json(body))
    }
}

impl Future for Call {
    type Output = reqwest::Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<reqwest::Response> {
        if let Some(request) = self.request.take() {
            self.sending = Some(Box::pin(async move { request.send().await.unwrap() }));
        }
        let sending = self
            .sending
            .as_mut()
            .expect("a call polled after it answered");
        sending.as_mut().poll(cx)
    }
}

/// Reading an answer that must have a given status.
pub trait Answer {
    /// Asserts the status (the body in the message if not) and returns the
    /// JSON body (`null` when there is none).
    fn expect(self, status: u16) -> impl Future<Output = Value> + Send;

    /// Asserts the status and reads the body as `T`, an answer type of
    /// `api::wire` (the test fails if the body does not fit it).
    fn expect_json<T: DeserializeOwned>(self, status: u16) -> impl Future<Output = T> + Send;
}

impl Answer for reqwest::Response {
    async fn expect(self, status: u16) -> Value {
        let seen = self.status();
        let text = self.text().await.unwrap();
        assert_eq!(seen.as_u16(), status, "{text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    async fn expect_json<T: DeserializeOwned>(self, status: u16) -> T {
        let seen = self.status();
        let text = self.text().await.unwrap();
        assert_eq!(seen.as_u16(), status, "{text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} does not read {text}: {e}", std::any::type_name::<T>()))
    }
}

impl Api {
    /// `method path` as this principal, without a body.
    pub fn request(&self, method: Method, path: &str) -> Call {
        let request = self
            .client
            .request(method, format!("{}{path}", self.address))
            .bearer_auth(&self.token);
        Call {
            request: Some(request),
            sending: None,
        }
    }

    pub fn get(&self, path: &str) -> Call {
        self.request(Method::GET, path)
    }

    pub fn post(&self, path: &str, body: &(impl Serialize + ?Sized)) -> Call {
        self.request(Method::POST, path).json(body)
    }

    pub fn patch(&self, path: &str, body: &(impl Serialize + ?Sized)) -> Call {
        self.request(Method::PATCH, path).json(body)
    }

    pub fn delete(&self, path: &str) -> Call {
        self.request(Method::DELETE, path)
    }

    // Leads.

    /// `POST /api/leads`.
    pub fn create_lead(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/leads", body)
    }

    /// Creates a lead (`201`) and returns its id.
    pub async fn new_lead(&self, body: &(impl Serialize + ?Sized)) -> i64 {
        let lead = self.create_lead(body).await.expect(201).await;
        lead["id"].as_i64().unwrap()
    }

    /// Sends lead `source_ref` of source `webform` named `name`, new or a
    /// change (`201` or `200`); returns the answer's body.
    pub async fn webform_lead(&self, source_ref: &str, name: &str) -> Value {
        let body = json!({"source": "webform", "source_ref": source_ref, "name": name});
        let response = self.create_lead(&body).await;
        let status = response.status();
        assert!(status.is_success(), "{status}");
        response.json().await.unwrap()
    }

    /// `GET /api/leads/{id}`.
    pub fn lead(&self, id: i64) -> Call {
        self.get(&format!("/api/leads/{id}"))
    }

    /// `GET /api/leads{query}` (`query` empty or starting with `?`).
    pub fn leads(&self, query: &str) -> Call {
        self.get(&format!("/api/leads{query}"))
    }

    /// `PATCH /api/leads/{id}`.
    pub fn patch_lead(&self, id: i64, body: &(impl Serialize + ?Sized)) -> Call {
        self.patch(&format!("/api/leads/{id}"), body)
    }

    /// `DELETE /api/leads/{id}{query}`: an erasure.
    pub fn erase_lead(&self, id: i64, query: &str) -> Call {
        self.delete(&format!("/api/leads/{id}{query}"))
    }

    /// `POST /api/leads/{id}/transitions` to status `to` (a `LeadStatus`, or
    /// any text), with a reason if given.
    pub fn move_lead(&self, id: i64, to: impl Serialize, reason: Option<&str>) -> Call {
        self.post(
            &format!("/api/leads/{id}/transitions"),
            &json!({"to": to, "reason": reason}),
        )
    }

    /// `POST /api/leads/{id}/notes` with `{"text": text}`.
    pub fn add_note(&self, id: i64, text: &str) -> Call {
        let note = NoteIn {
            text: text.to_owned(),
            kind: Default::default(),
        };
        self.post(&format!("/api/leads/{id}/notes"), &note)
    }

    /// `POST /api/leads/{id}/convert`.
    pub fn convert_lead(&self, id: i64, body: &(impl Serialize + ?Sized)) -> Call {
        self.post(&format!("/api/leads/{id}/convert"), body)
    }

    /// `GET /api/leads/{id}/activities{query}`: the lead's timeline.
    pub fn lead_activities(&self, id: i64, query: &str) -> Call {
        self.get(&format!("/api/leads/{id}/activities{query}"))
    }

    // Contacts, companies and deals.

    /// `POST /api/{kind}` (`contacts`, `companies` or `deals`).
    pub fn create_crm(&self, kind: &str, body: &(impl Serialize + ?Sized)) -> Call {
        self.post(&format!("/api/{kind}"), body)
    }

    /// `PATCH /api/{kind}/{id}`.
    pub fn patch_crm(&self, kind: &str, id: i64, body: &(impl Serialize + ?Sized)) -> Call {
        self.patch(&format!("/api/{kind}/{id}"), body)
    }

    /// `POST /api/deals/{id}/transitions` to stage `to` (a `DealStage`, or
    /// any text), with the reason it was lost if given.
    pub fn move_deal(&self, id: i64, to: impl Serialize, reason: Option<&str>) -> Call {
        self.post(
            &format!("/api/deals/{id}/transitions"),
            &json!({"to": to, "reason": reason}),
        )
    }

    // Sources.

    /// `POST /api/sources`.
    pub fn create_source(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/sources", body)
    }

    /// `GET /api/sources/{name}`.
    pub fn source(&self, name: &str) -> Call {
        self.get(&format!("/api/sources/{name}"))
    }

    /// `PATCH /api/sources/{name}`: changes only the fields in `body`.
    pub fn patch_source(&self, name: &str, body: &(impl Serialize + ?Sized)) -> Call {
        self.patch(&format!("/api/sources/{name}"), body)
    }

    // Subscriptions.

    /// `POST /api/subscriptions`.
    pub fn create_subscription(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/subscriptions", body)
    }

    /// Subscribes `url` to `event_types` (`[]`: all of them); `201`.
    /// Returns the created subscription, its secret shown this once.
    pub async fn new_subscription(&self, url: &str, event_types: Value) -> Value {
        self.create_subscription(&json!({"url": url, "event_types": event_types}))
            .await
            .expect(201)
            .await
    }

    /// Subscribes `receiver` to `event_types` and gives it the new signing
    /// secret, so that it checks our signatures. Returns the subscription.
    pub async fn subscribe(&self, receiver: &Receiver, event_types: Value) -> Value {
        let created = self.new_subscription(&receiver.url, event_types).await;
        receiver.set_secret(created["secret"].as_str().unwrap());
        created
    }

    /// `PATCH /api/subscriptions/{id}`.
    pub fn patch_subscription(&self, id: i64, body: &(impl Serialize + ?Sized)) -> Call {
        self.patch(&format!("/api/subscriptions/{id}"), body)
    }

    /// `POST /api/subscriptions/{id}/rotate-secret`.
    pub fn rotate_secret(&self, id: i64, body: &(impl Serialize + ?Sized)) -> Call {
        self.post(&format!("/api/subscriptions/{id}/rotate-secret"), body)
    }

    /// `POST /api/subscriptions/{id}/test`: a ping to that subscription only.
    pub fn ping_subscription(&self, id: i64) -> Call {
        self.request(Method::POST, &format!("/api/subscriptions/{id}/test"))
    }

    // Erasure.

    /// `DELETE /api/tombstones/{key_hash}`: lifts an erasure's tombstone.
    pub fn lift_tombstone(&self, key_hash: &str) -> Call {
        self.delete(&format!("/api/tombstones/{key_hash}"))
    }

    // Imports.

    /// `POST /api/imports?{query}` with a file of `content_type`.
    pub fn upload_import(
        &self,
        query: &str,
        content_type: &str,
        file: impl Into<reqwest::Body>,
    ) -> Call {
        self.request(Method::POST, &format!("/api/imports?{query}"))
            .body(content_type, file)
    }

    // Operations.

    /// `POST /api/ops/inbox/{id}/retry`.
    pub fn retry_inbox_event(&self, id: i64) -> Call {
        self.request(Method::POST, &format!("/api/ops/inbox/{id}/retry"))
    }

    /// `POST /api/ops/inbox/retry` with a filter body.
    pub fn retry_inbox_events(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/ops/inbox/retry", body)
    }

    /// `POST /api/ops/deliveries/{id}/retry`.
    pub fn retry_delivery(&self, id: i64) -> Call {
        self.request(Method::POST, &format!("/api/ops/deliveries/{id}/retry"))
    }

    /// `POST /api/ops/deliveries/retry` with a filter body.
    pub fn retry_deliveries(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/ops/deliveries/retry", body)
    }

    /// `POST /api/ops/lead-processing/retry` with a filter body.
    pub fn retry_lead_processing(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/ops/lead-processing/retry", body)
    }

    /// `POST /api/ops/reconcile/rejected/retry` with a filter body.
    pub fn retry_rejected_records(&self, body: &(impl Serialize + ?Sized)) -> Call {
        self.post("/api/ops/reconcile/rejected/retry", body)
    }

    /// `POST /api/ops/reconcile/{source}`: starts a reconcile run, with
    /// `body` (a range, `dry_run`) or without one.
    pub fn start_reconcile(&self, source: &str, body: Option<&Value>) -> Call {
        let call = self.request(Method::POST, &format!("/api/ops/reconcile/{source}"));
        match body {
            Some(body) => call.json(body),
            None => call,
        }
    }
}
