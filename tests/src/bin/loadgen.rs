//! Load generator for `bench/run`: keep-alive HTTP clients posting realistic
//! lead records, closed-loop (N clients as fast as they go) or open-loop (a
//! fixed rate), printing one JSON line of figures.
//!
//! loadgen intake  URL TOKEN  --clients 32 --seconds 10 [--dup-share 0.9] [--rate 500] [--source S]
//! loadgen webhook URL SECRET --clients 32 --seconds 10 [--rate 500] [--source S] [--run R]
//!
//! `webhook` posts Standard Webhooks deliveries to `/webhooks/{source}`,
//! signed with the source's `whsec_` secret, event ids `msg_{run}_{n}`.
//! Open-loop latencies count from when a request was due, not when it was
//! sent, so a stalled server is not hidden by a client that waited for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use leadpipe_tests::webhooks::{Headers, standard_headers};
use serde_json::json;

struct Args {
    mode: String,
    url: String,
    token: String,
    clients: usize,
    seconds: u64,
    dup_share: f64,
    rate: Option<f64>,
    source: String,
    run: String,
}

fn parse() -> Args {
    let mut raw = std::env::args().skip(1);
    let mode = raw.next().expect("mode: intake");
    let url = raw.next().expect("base URL");
    let token = raw.next().expect("token or secret");
    let mut args = Args {
        mode,
        url,
        token,
        clients: 8,
        seconds: 10,
        dup_share: 0.0,
        rate: None,
        source: "bench".into(),
        run: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
    };
    while let Some(flag) = raw.next() {
        let value = raw.next().expect("flag value");
        match flag.as_str() {
            "--clients" => args.clients = value.parse().unwrap(),
            "--seconds" => args.seconds = value.parse().unwrap(),
            "--dup-share" => args.dup_share = value.parse().unwrap(),
            "--rate" => args.rate = Some(value.parse().unwrap()),
            "--source" => args.source = value,
            "--run" => args.run = value,
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// A lead record of about 600 bytes, like a web form with tracking fields.
fn record(source: &str, source_ref: &str, n: u64) -> serde_json::Value {
    json!({
        "source": source,
        "source_ref": source_ref,
        "email": format!("person{n}@example-company.com"),
        "name": format!("Person Number {n}"),
        "phone": format!("+4930{:08}", n % 100_000_000),
        "company": "Example Company GmbH",
        "source_updated_at": "2026-11-30T10:00:00Z",
        "payload": {
            "form": "contact-sales",
            "utm_source": "newsletter",
            "utm_medium": "email",
            "utm_campaign": "winter-launch-2026",
            "landing_page": "https://www.example.com/pricing?plan=enterprise&ref=hero",
            "message": "We are evaluating lead routing for a sales team of forty people and would like a demo next week.",
            "consent": {"marketing": true, "terms": "2026-11"},
            "ip_country": "DE"
        }
    })
}

/// A Standard Webhooks delivery of one record: where, body and headers.
fn webhook(args: &Args, key: &[u8], source_ref: &str, n: u64) -> (String, String, Headers) {
    let record = record(&args.source, source_ref, n);
    let body = json!({
        "type": "lead.created",
        "data": {
            "id": source_ref,
            "email": record["email"],
            "name": record["name"],
            "phone": record["phone"],
            "company": record["company"],
            "updated_at": record["source_updated_at"],
            "form": record["payload"],
        }
    })
    .to_string();
    let msg_id = format!("msg_{}_{n}", args.run);
    let headers = standard_headers(
        key,
        &msg_id,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    (
        format!("{}/webhooks/{}", args.url, args.source),
        body,
        headers,
    )
}

#[tokio::main]
async fn main() {
    let args = Arc::new(parse());
    assert!(
        args.mode == "intake" || args.mode == "webhook",
        "modes: intake, webhook"
    );
    let signing_key: Arc<Vec<u8>> = Arc::new(if args.mode == "webhook" {
        let encoded = args.token.strip_prefix("whsec_").expect("a whsec_ secret");
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64 after whsec_")
    } else {
        Vec::new()
    });
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        // A stuck server fails the run instead of hanging the benchmark.
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    // Open loop: each client fires on its own schedule of rate/clients per second.
    let interval = args
        .rate
        .map(|r| Duration::from_secs_f64(args.clients as f64 / r));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.clients)
        .map(|client_no| {
            let (args, client, counter, errors, signing_key) = (
                args.clone(),
                client.clone(),
                counter.clone(),
                errors.clone(),
                signing_key.clone(),
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut next = Instant::now()
                    + interval.map_or(Duration::ZERO, |i| {
                        i.mul_f64(client_no as f64 / args.clients as f64)
                    });
                while Instant::now() < deadline {
                    let mut due = None;
                    if let Some(interval) = interval {
                        tokio::time::sleep_until(next.into()).await;
                        due = Some(next);
                        next += interval;
                    }
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    // Duplicate-heavy runs resend one of 100 records unchanged.
                    let dup = args.dup_share > 0.0 && (n % 1000) as f64 / 1000.0 < args.dup_share;
                    let (key, seq) = if dup {
                        (n % 100, n % 100)
                    } else {
                        (n + 1_000, n + 1_000)
                    };
                    let source_ref = format!("{}-{key}", args.run);
                    let request = if args.mode == "webhook" {
                        let (url, body, headers) = webhook(&args, &signing_key, &source_ref, seq);
                        headers
                            .into_iter()
                            .fold(client.post(url), |r, (name, value)| r.header(name, value))
                            .body(body)
                    } else {
                        client
                            .post(format!("{}/api/leads", args.url))
                            .bearer_auth(&args.token)
                            .header("content-type", "application/json")
                            .body(record(&args.source, &source_ref, seq).to_string())
                    };
                    let sent = due.unwrap_or_else(Instant::now);
                    let response = request.send().await;
                    match response {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            latencies.push(sent.elapsed().as_micros() as u64);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                latencies
            })
        })
        .collect();
    let mut all: Vec<u64> = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    println!(
        "{}",
        json!({
            "requests": all.len(),
            "errors": errors.load(Ordering::Relaxed),
            "seconds": elapsed,
            "rps": all.len() as f64 / elapsed,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
        })
    );
}
