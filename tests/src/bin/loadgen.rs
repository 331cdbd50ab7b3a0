//! Load generator for `bench/run`: keep-alive HTTP clients posting realistic
//! lead records, closed-loop (N clients as fast as they go) or open-loop (a
//! fixed rate), printing one JSON line of figures. Admission control's
//! `503 /problems/inbox-backlog-full` answers are counted as `refused`,
//! apart from `errors`; the next request is a new one either way.
//! `started_unix` is when the clients started, for windows in the database.
//!
//! loadgen intake  URL TOKEN  --clients 32 --seconds 10 [--dup-share 0.9] [--rate 500] [--source S]
//! loadgen webhook URL SECRET --clients 32 --seconds 10 [--rate 500] [--source S] [--run R]
//! loadgen record N     (prints the intake record number N sends, for the raw baseline's pgbench script)
//! loadgen upsert-sql [--rows N] [--record FILE]
//!                       (prints leadpipe's intake upsert as PostgreSQL SQL, N sample rows or
//!                        copies of FILE's record, for the raw baseline's pgbench script)
//!
//! `webhook` posts Standard Webhooks deliveries to `/webhooks/{source}`,
//! signed with the source's `whsec_` secret, event ids `msg_{run}_{n}`.
//! Open-loop latencies count from when a request was due, not when it was
//! sent, so a stalled server is not hidden by a client that waited for it.
//!
//! The client is as lean as `pgbench`, the raw baseline it is compared with:
//! one thread, one keep-alive connection per client, HTTP/1.1 written and
//! read by hand. The load generator shares the cores with the server and
//! PostgreSQL, so every microsecond it spends is one the server lacks; a
//! general-purpose client (reqwest) cost several times more CPU per request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use leadpipe_tests::webhooks::standard_headers;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// The fields of a lead record of about 600 bytes, like a web form with
/// tracking fields; `payload` is the form itself.
const PAYLOAD: &str = r#"{"form":"contact-sales","utm_source":"newsletter","utm_medium":"email","utm_campaign":"winter-launch-2026","landing_page":"https://www.example.com/pricing?plan=enterprise&ref=hero","message":"We are evaluating lead routing for a sales team of forty people and would like a demo next week.","consent":{"marketing":true,"terms":"2026-11"},"ip_country":"DE"}"#;
const COMPANY: &str = "Example Company GmbH";
const UPDATED_AT: &str = "2026-11-30T10:00:00Z";

/// `POST /api/leads` body. Every value is plain ASCII without quotes or
/// backslashes (sources and runs are the bench's own names), so it is
/// written as text; a test checks it is the JSON it looks like.
fn intake_body(out: &mut String, source: &str, source_ref: &str, n: u64) {
    out.clear();
    write!(
        out,
        r#"{{"source":"{source}","source_ref":"{source_ref}","email":"person{n}@example-company.com","name":"Person Number {n}","phone":"+4930{phone:08}","company":"{COMPANY}","source_updated_at":"{UPDATED_AT}","payload":{PAYLOAD}}}"#,
        phone = n % 100_000_000,
    )
    .unwrap();
}

/// A Standard Webhooks `lead.created` delivery of the same record.
fn webhook_body(out: &mut String, source_ref: &str, n: u64) {
    out.clear();
    write!(
        out,
        r#"{{"type":"lead.created","data":{{"id":"{source_ref}","email":"person{n}@example-company.com","name":"Person Number {n}","phone":"+4930{phone:08}","company":"{COMPANY}","updated_at":"{UPDATED_AT}","form":{PAYLOAD}}}}}"#,
        phone = n % 100_000_000,
    )
    .unwrap();
}

/// One keep-alive HTTP/1.1 connection. A failed exchange drops it; the
/// next request opens a new one.
struct Connection {
    addr: String,
    stream: Option<TcpStream>,
    request: Vec<u8>,
    response: Vec<u8>,
}

impl Connection {
    fn new(addr: String) -> Self {
        Self {
            addr,
            stream: None,
            request: Vec::with_capacity(2048),
            response: Vec::with_capacity(2048),
        }
    }

    /// Sends one request (head lines without the final blank line, then
    /// the body) and returns the response's status.
    async fn exchange(&mut self, head: &str, body: &[u8]) -> std::io::Result<u16> {
        self.request.clear();
        self.request.extend_from_slice(head.as_bytes());
        self.request.extend_from_slice(b"Content-Length: ");
        self.request
            .extend_from_slice(body.len().to_string().as_bytes());
        self.request.extend_from_slice(b"\r\n\r\n");
        self.request.extend_from_slice(body);
        let result = self.round_trip().await;
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    async fn round_trip(&mut self) -> std::io::Result<u16> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.addr).await?;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().expect("connected above");
        stream.write_all(&self.request).await?;
        self.response.clear();
        let mut chunk = [0u8; 4096];
        let (head_end, status, content_length, close) = loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.response.extend_from_slice(&chunk[..n]);
            if let Some(end) = find(&self.response, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.response[..end])
                    .map_err(|_| std::io::Error::other("response head is not UTF-8"))?;
                let status = head
                    .get(9..12)
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(|| std::io::Error::other("no status line"))?;
                let mut length = None;
                let mut close = false;
                for line in head.split("\r\n").skip(1) {
                    let Some((name, value)) = line.split_once(':') else {
                        continue;
                    };
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse::<usize>().ok();
                    } else if name.eq_ignore_ascii_case("connection") {
                        close = value.trim().eq_ignore_ascii_case("close");
                    } else if name.eq_ignore_ascii_case("transfer-encoding") {
                        return Err(std::io::Error::other("chunked responses are not read"));
                    }
                }
                break (end + 4, status, length.unwrap_or(0), close);
            }
        };
        while self.response.len() < head_end + content_length {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.response.extend_from_slice(&chunk[..n]);
        }
        if close {
            self.stream = None;
        }
        Ok(status)
    }
}

/// The problem type of admission control's refusal, in a response body.
const BACKLOG_FULL: &[u8] = b"/problems/inbox-backlog-full";

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("upsert-sql") {
        print_upsert_sql();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("record") {
        let n = std::env::args()
            .nth(2)
            .expect("record N")
            .parse()
            .expect("N, a number");
        let mut body = String::new();
        intake_body(&mut body, "bench", "__REF__", n);
        println!("{body}");
        return;
    }
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
    let authority = args
        .url
        .strip_prefix("http://")
        .expect("an http:// URL")
        .trim_end_matches('/')
        .to_owned();
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // `503 /problems/inbox-backlog-full`: admission control refused the
    // request, as documented while the workers are behind; counted, not an
    // error (a `503` of another kind, such as the database unreachable, is).
    let refused = Arc::new(AtomicU64::new(0));
    // A stuck server fails the run instead of hanging the benchmark.
    let timeout = Duration::from_secs(30);
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    // Open loop: each client fires on its own schedule of rate/clients per second.
    let interval = args
        .rate
        .map(|r| Duration::from_secs_f64(args.clients as f64 / r));
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let tasks: Vec<_> = (0..args.clients)
        .map(|client_no| {
            let (args, counter, errors, refused, signing_key) = (
                args.clone(),
                counter.clone(),
                errors.clone(),
                refused.clone(),
                signing_key.clone(),
            );
            let authority = authority.clone();
            let mut connection = Connection::new(authority.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut body = String::with_capacity(1024);
                let mut head = String::with_capacity(512);
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
                    head.clear();
                    if args.mode == "webhook" {
                        webhook_body(&mut body, &source_ref, seq);
                        let msg_id = format!("msg_{}_{seq}", args.run);
                        let signed = standard_headers(
                            &signing_key,
                            &msg_id,
                            chrono::Utc::now().timestamp(),
                            body.as_bytes(),
                        );
                        write!(head, "POST /webhooks/{} HTTP/1.1\r\nHost: {authority}\r\n", args.source).unwrap();
                        for (name, value) in signed {
                            write!(head, "{name}: {value}\r\n").unwrap();
                        }
                    } else {
                        intake_body(&mut body, &args.source, &source_ref, seq);
                        write!(
                            head,
                            "POST /api/leads HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n",
                            args.token
                        )
                        .unwrap();
                    }
                    let sent = due.unwrap_or_else(Instant::now);
                    let answer = tokio::time::timeout(timeout, connection.exchange(&head, body.as_bytes())).await;
                    match answer {
                        Ok(Ok(status)) if (200..300).contains(&status) => {
                            latencies.push(sent.elapsed().as_micros() as u64);
                        }
                        Ok(Ok(503)) if find(&connection.response, BACKLOG_FULL).is_some() => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            // Timed out mid-exchange: the connection's state is unknown.
                            connection.stream = None;
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
            "refused": refused.load(Ordering::Relaxed),
            "started_unix": started_unix,
            "seconds": elapsed,
            "rps": all.len() as f64 / elapsed,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
        })
    );
}

/// `upsert-sql`: the statement leadpipe's intake issues on PostgreSQL, from
/// the same query builder, so the raw baseline writes what the server writes.
fn print_upsert_sql() {
    let mut rows = 1;
    let mut record = None;
    let mut raw = std::env::args().skip(2);
    while let Some(flag) = raw.next() {
        let value = raw.next().expect("flag value");
        match flag.as_str() {
            "--rows" => rows = value.parse().expect("--rows N, a number"),
            "--record" => record = Some(value),
            other => panic!("unknown flag {other}"),
        }
    }
    let sample = record.map(|path| {
        let text = std::fs::read_to_string(&path).expect("the record file");
        let record: domain::lead::record::LeadRecord =
            serde_json::from_str(&text).expect("a lead record (JSON, as POST /api/leads takes it)");
        record.normalise().expect("a valid lead record")
    });
    println!(
        "{}",
        domain::lead::ingest::upsert_sql_for_benchmark(rows.max(1), sample)
            .expect("the upsert SQL")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written bodies are the JSON they look like, with the fields
    /// the old `json!` bodies had.
    #[test]
    fn bodies_are_valid_json_of_the_record() {
        let mut out = String::new();
        intake_body(&mut out, "bench", "run1-1000", 1000);
        let record: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(record["source_ref"], "run1-1000");
        assert_eq!(record["phone"], "+493000001000");
        assert_eq!(record["payload"]["consent"]["marketing"], true);
        assert!((550..700).contains(&out.len()), "{} bytes", out.len());
        webhook_body(&mut out, "run1-1000", 1000);
        let delivery: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(delivery["type"], "lead.created");
        assert_eq!(delivery["data"]["form"], record["payload"]);
        assert_eq!(delivery["data"]["email"], record["email"]);
    }
}
