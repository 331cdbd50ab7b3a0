//! A downstream receiver for tests: a real HTTP server on loopback that
//! checks Standard Webhooks signatures with its own implementation (not
//! leadpipe's) and answers as the test tells it to.

use std::sync::{Arc, Mutex};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

#[derive(Debug, Clone)]
pub struct Received {
    pub webhook_id: String,
    pub body: serde_json::Value,
    pub signature_ok: bool,
    /// What the receiver answered.
    pub status: u16,
    /// When the request arrived.
    pub at: std::time::Instant,
}

#[derive(Default)]
struct State {
    secret: Option<String>,
    answer: u16,
    retry_after: Option<String>,
    received: Vec<Received>,
    /// How long each request is held before its answer.
    delay: Option<std::time::Duration>,
    in_flight: usize,
    max_in_flight: usize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

fn verify(secret: &str, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let Ok(key) = STANDARD.decode(secret.trim_start_matches("whsec_")) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
        return false;
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    header.split(' ').any(|candidate| candidate == expected)
}

async fn hook(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<Arc<Mutex<State>>>,
) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let delay = {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.in_flight += 1;
        state.max_in_flight = state.max_in_flight.max(state.in_flight);
        state.delay
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    state.in_flight -= 1;
    let signature_ok = state.secret.as_deref().is_some_and(|s| {
        verify(
            s,
            &header("webhook-id"),
            &header("webhook-timestamp"),
            &body,
            &header("webhook-signature"),
        )
    });
    let answer = state.answer;
    state.received.push(Received {
        at: std::time::Instant::now(),
        webhook_id: header("webhook-id"),
        body: serde_json::from_slice(&body).unwrap_or_default(),
        signature_ok,
        status: answer,
    });
    let mut response =
        HttpResponse::build(actix_web::http::StatusCode::from_u16(answer).unwrap_or_default());
    if let Some(retry_after) = &state.retry_after {
        response.insert_header(("retry-after", retry_after.clone()));
    }
    if (300..400).contains(&answer) {
        response.insert_header(("location", "http://127.0.0.1:1/elsewhere"));
    }
    response.finish()
}

impl Receiver {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State {
            answer: 200,
            ..Default::default()
        }));
        let data = web::Data::new(state.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/hook", web::post().to(hook))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        tokio::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            state,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn set_secret(&self, secret: &str) {
        self.with(|s| s.secret = Some(secret.to_owned()));
    }

    /// The status every following request gets.
    pub fn answer(&self, status: u16) {
        self.with(|s| s.answer = status);
    }

    pub fn retry_after(&self, value: Option<&str>) {
        self.with(|s| s.retry_after = value.map(str::to_owned));
    }

    /// Holds every following request this long before answering, so
    /// concurrent requests overlap.
    pub fn delay(&self, delay: std::time::Duration) {
        self.with(|s| s.delay = Some(delay));
    }

    /// The most requests that were ever in the receiver at once.
    pub fn max_in_flight(&self) -> usize {
        self.with(|s| s.max_in_flight)
    }

    pub fn received(&self) -> Vec<Received> {
        self.with(|s| s.received.clone())
    }

    /// Requests answered with a 2xx.
    pub fn accepted(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.status))
            .collect()
    }
}
