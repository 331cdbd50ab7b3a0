//! A fake lead source: a real HTTP server on loopback that holds lead
//! records, serves them through the pull API reconcile speaks
//! (`GET /leads?since=&limit=` → `{data, next_cursor, has_more}`), and
//! builds the webhook deliveries it would send for them. The demo and the
//! end-to-end tests both use it; tests can make it fail, slow down or
//! demand an auth header.
//!
//! Every change to a record gives it the next sequence number; a cursor is
//! the sequence number of the last record served, so `since` returns what
//! changed after it, in change order, as real "changed since" APIs do.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde::Deserialize;
use serde_json::{Value, json};

/// Requests from this sequence number on fail with `status` (`times` of
/// them, or all while `times` is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub from_seq: u64,
    pub status: u16,
    pub times: Option<u32>,
}

/// One pull request as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub since: Option<String>,
    pub limit: Option<usize>,
    pub auth: Option<String>,
    pub status: u16,
}

#[derive(Default)]
struct State {
    records: Vec<Value>,
    /// Each record's version: bumped by every change, part of its event id.
    versions: Vec<u32>,
    /// Change sequence number → record index.
    changes: BTreeMap<u64, usize>,
    seq_of: Vec<u64>,
    next_seq: u64,
    auth: Option<(String, String)>,
    failure: Option<Failure>,
    delay: Duration,
    requests: Vec<PullRequest>,
}

impl State {
    fn touch(&mut self, index: usize) {
        self.next_seq += 1;
        if let Some(old) = self.seq_of.get(index).copied() {
            self.changes.remove(&old);
            self.seq_of[index] = self.next_seq;
        } else {
            self.seq_of.push(self.next_seq);
        }
        self.changes.insert(self.next_seq, index);
    }
}

#[derive(Clone)]
pub struct FakeSource {
    /// The pull URL: `http://127.0.0.1:{port}/leads`.
    pub pull_url: String,
    state: Arc<Mutex<State>>,
    server: ServerHandle,
}

/// The record the fake holds at `index` when generated.
pub fn generated_record(index: usize) -> Value {
    let n = index + 1;
    json!({
        "id": format!("lead-{n:07}"),
        "email": format!("person{n:07}@example-company.com"),
        "name": format!("Person {n}"),
        "company": format!("Company {}", n % 997),
        "phone": format!("+4930{n:07}"),
        "updated_at": "2026-11-30T10:00:00Z",
        "utm_source": "newsletter",
    })
}

#[derive(Deserialize)]
struct PullQuery {
    since: Option<String>,
    limit: Option<usize>,
}

async fn pull(
    req: HttpRequest,
    query: web::Query<PullQuery>,
    state: web::Data<Arc<Mutex<State>>>,
) -> HttpResponse {
    let delay = lock(&state).delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut state = lock(&state);
    let auth = state.auth.as_ref().and_then(|(header, _)| {
        req.headers()
            .get(header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    let mut log = PullRequest {
        since: query.since.clone(),
        limit: query.limit,
        auth: auth.clone(),
        status: 200,
    };
    let answer = answer(&mut state, &query, auth.as_deref());
    log.status = answer.status().as_u16();
    state.requests.push(log);
    answer
}

fn answer(state: &mut State, query: &PullQuery, auth: Option<&str>) -> HttpResponse {
    if let Some((_, expected)) = &state.auth
        && auth != Some(expected.as_str())
    {
        return HttpResponse::Unauthorized().json(json!({"error": "bad credentials"}));
    }
    let since = match query.since.as_deref().map(str::parse::<u64>) {
        None => 0,
        Some(Ok(since)) => since,
        Some(Err(_)) => return HttpResponse::BadRequest().json(json!({"error": "bad cursor"})),
    };
    if let Some(failure) = state.failure
        && since >= failure.from_seq
    {
        match failure.times {
            Some(0) => state.failure = None,
            Some(n) => {
                state.failure = Some(Failure {
                    times: Some(n - 1),
                    ..failure
                });
                return fail(failure.status);
            }
            None => return fail(failure.status),
        }
    }
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let mut data = Vec::with_capacity(limit);
    let mut last = since;
    for (&seq, &index) in state.changes.range(since + 1..).take(limit) {
        data.push(state.records[index].clone());
        last = seq;
    }
    let has_more = state.changes.range(last + 1..).next().is_some();
    HttpResponse::Ok().json(json!({
        "data": data,
        "next_cursor": last.to_string(),
        "has_more": has_more,
    }))
}

fn fail(status: u16) -> HttpResponse {
    HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status)
            .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR),
    )
    .json(json!({"error": "the fake source was told to fail"}))
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeSource {
    /// Starts the server on a free loopback port with `records` generated
    /// records (`generated_record`).
    pub async fn start(records: usize) -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State::default()));
        {
            let mut s = lock(&state);
            for index in 0..records {
                s.records.push(generated_record(index));
                s.versions.push(1);
                s.touch(index);
            }
        }
        let data = web::Data::new(state.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/leads", web::get().to(pull))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)?
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Ok(Self {
            pull_url: format!("http://127.0.0.1:{port}/leads"),
            state,
            server: handle,
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut lock(&self.state))
    }

    pub fn len(&self) -> usize {
        self.with(|s| s.records.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn record(&self, index: usize) -> Value {
        self.with(|s| s.records[index].clone())
    }

    /// The record's `source_ref` (its `id`).
    pub fn source_ref(&self, index: usize) -> String {
        self.with(|s| {
            s.records[index]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
    }

    /// Changes a record at the source: it becomes the newest change, with a
    /// new version (so its next delivery has a new event id).
    pub fn update(&self, index: usize, change: impl FnOnce(&mut Value)) {
        self.with(|s| {
            change(&mut s.records[index]);
            s.versions[index] += 1;
            s.touch(index);
        });
    }

    /// A Standard Webhooks delivery of the record as it is now: the event
    /// id (`webhook-id`) and the body. Redelivering it sends the same id.
    pub fn delivery(&self, index: usize) -> (String, Vec<u8>) {
        self.with(|s| {
            let record = &s.records[index];
            let id = record["id"].as_str().unwrap_or_default();
            let event_id = format!("msg_{id}_v{}", s.versions[index]);
            let body = json!({"type": "lead.updated", "data": record});
            (event_id, body.to_string().into_bytes())
        })
    }

    /// The cursor a run has after `pages` full pages of `page_size` records
    /// (records never changed since they were generated).
    pub fn cursor_after(pages: usize, page_size: usize) -> String {
        (pages * page_size).to_string()
    }

    pub fn require_auth(&self, header: &str, value: &str) {
        self.with(|s| s.auth = Some((header.to_owned(), value.to_owned())));
    }

    pub fn fail(&self, failure: Option<Failure>) {
        self.with(|s| s.failure = failure);
    }

    /// A pause before every answer.
    pub fn delay(&self, delay: Duration) {
        self.with(|s| s.delay = delay);
    }

    pub fn requests(&self) -> Vec<PullRequest> {
        self.with(|s| s.requests.clone())
    }

    pub async fn stop(&self) {
        self.server.stop(true).await;
    }
}
