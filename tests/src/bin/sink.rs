//! A fast webhook receiver for `bench/run`: answers every POST with 204,
//! counts deliveries, checks each lead's events arrive in order (the
//! `version` in the event's data only grows per lead `id`), and after
//! `--expect` deliveries prints one JSON line of figures and exits.
//!
//! sink --expect 20000 [--timeout-secs 600]
//!
//! Prints `listening on PORT` first, so the caller knows where to point
//! the subscription.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

#[derive(Default)]
struct Tally {
    count: u64,
    out_of_order: u64,
    repeats: u64,
    last_version: HashMap<i64, i64>,
    first: Option<Instant>,
    last: Option<Instant>,
}

struct Sink {
    tally: Mutex<Tally>,
    expect: u64,
    done: tokio::sync::Notify,
}

async fn hook(body: web::Bytes, sink: web::Data<Arc<Sink>>) -> HttpResponse {
    let event: Value = serde_json::from_slice(&body).unwrap_or_default();
    let lead = event["data"]["id"].as_i64().unwrap_or(-1);
    let version = event["data"]["version"].as_i64().unwrap_or(-1);
    let mut t = sink.tally.lock().unwrap();
    let now = Instant::now();
    t.first.get_or_insert(now);
    t.last = Some(now);
    t.count += 1;
    match t.last_version.insert(lead, version) {
        Some(previous) if previous == version => t.repeats += 1,
        Some(previous) if previous > version => t.out_of_order += 1,
        _ => {}
    }
    if t.count == sink.expect {
        sink.done.notify_one();
    }
    HttpResponse::NoContent().finish()
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let expect: u64 = arg("--expect")
        .expect("--expect N")
        .parse()
        .expect("a number");
    let timeout: u64 = arg("--timeout-secs").map_or(600, |s| s.parse().expect("a number"));
    let sink = Arc::new(Sink {
        tally: Mutex::new(Tally::default()),
        expect,
        done: tokio::sync::Notify::new(),
    });
    let data = web::Data::new(sink.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    println!("listening on {}", listener.local_addr()?.port());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .default_service(web::post().to(hook))
    })
    .workers(1)
    .listen(listener)?
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    let finished = tokio::time::timeout(Duration::from_secs(timeout), sink.done.notified())
        .await
        .is_ok();
    let figures = {
        let t = sink.tally.lock().unwrap();
        let span = match (t.first, t.last) {
            (Some(first), Some(last)) => last.duration_since(first).as_secs_f64(),
            _ => 0.0,
        };
        json!({
            "finished": finished,
            "count": t.count,
            "leads": t.last_version.len(),
            "out_of_order": t.out_of_order,
            "repeats": t.repeats,
            "seconds": span,
            "per_s": if span > 0.0 { t.count as f64 / span } else { 0.0 },
        })
    };
    println!("{figures}");
    handle.stop(false).await;
    Ok(())
}
