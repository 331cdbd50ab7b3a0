//! The alert rules and the dashboard in `deploy/` against the series the code
//! really emits: the pipeline runs a little (a lead, a webhook and its
//! duplicate, a forged delivery, a dead inbox event, a reconcile that finds
//! missed deliveries, a source whose usual gap is configured, a rate-limited
//! guesser), then every metric the rules file and the
//! dashboard name must be in the scrape, with the label values they select
//! on. A renamed metric or label fails here rather than silently never
//! alerting in production.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use api::cli::demo::fake_source::FakeSource;
use api::config::HttpSettings;
use domain::auth::Role;
use leadpipe_tests::webhooks::{now, standard_headers};
use leadpipe_tests::{Backend, TestApp, eventually, fresh_postgres_database, on_both_backends};
use serde_json::{Value, json};

on_both_backends!(rules_and_dashboard_use_only_series_the_code_emits);

const WAIT: Duration = Duration::from_secs(20);

fn deploy_file(path: &str) -> String {
    let full = format!("{}/../deploy/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The PromQL expressions of the rules file (as text: no YAML parser is
/// needed to find metric names) and of every dashboard target.
fn expressions() -> Vec<String> {
    let mut exprs = vec![deploy_file("prometheus/leadpipe-rules.yml")];
    let dashboard: Value =
        serde_json::from_str(&deploy_file("grafana/leadpipe-dashboard.json")).unwrap();
    collect_exprs(&dashboard, &mut exprs);
    exprs
}

fn collect_exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr" | "query" | "definition", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// One selector in an expression: the metric as written, and the labels it
/// requires to equal a value (`=`; regex and negative matchers are skipped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Selector {
    metric: String,
    equal: Vec<(String, String)>,
}

fn selectors(expr: &str) -> BTreeSet<Selector> {
    let bytes = expr.as_bytes();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = expr[i..].find("leadpipe_") {
        let start = i + at;
        let preceded = start > 0
            && (bytes[start - 1].is_ascii_alphanumeric()
                || bytes[start - 1] == b'_'
                || bytes[start - 1] == b':');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_lowercase() || bytes[end] == b'_') {
            end += 1;
        }
        i = end;
        if preceded {
            continue;
        }
        let metric = expr[start..end].to_owned();
        let mut equal = Vec::new();
        if bytes.get(end) == Some(&b'{') {
            let close = expr[end..].find('}').map(|c| end + c).unwrap();
            equal = matchers(&expr[end + 1..close]);
            i = close;
        }
        found.insert(Selector { metric, equal });
    }
    found
}

/// `a="x", b=~"y|z", c!="w"` → `[(a, x)]`.
fn matchers(inside: &str) -> Vec<(String, String)> {
    let mut equal = Vec::new();
    let mut rest = inside;
    while let Some(quote) = rest.find('"') {
        let name_and_op = rest[..quote].trim_start_matches([',', ' ']);
        let after = &rest[quote + 1..];
        let close = after.find('"').unwrap();
        let value = &after[..close];
        if let Some(name) = name_and_op.strip_suffix('=')
            && !name.ends_with(['!', '=', '~'])
        {
            equal.push((name.trim().to_owned(), value.to_owned()));
        }
        rest = &after[close + 1..];
    }
    equal.sort();
    equal
}

/// The series of the scrape: metric name and its `label="value"` pairs.
fn series(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, _)| {
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            (metric.to_owned(), labels.to_owned())
        })
        .collect()
}

/// Why the scrape does not satisfy `selector`, if it does not. A histogram
/// is named by its family (`_bucket`, `_sum`, `_count` select its series).
fn missing(scrape: &[(String, String)], selector: &Selector) -> Option<String> {
    let family = |name: &str| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name)
            .to_owned()
    };
    let wanted = family(&selector.metric);
    let named: Vec<_> = scrape
        .iter()
        .filter(|(metric, _)| *metric == selector.metric || family(metric) == wanted)
        .collect();
    if named.is_empty() {
        return Some(format!("no series named {wanted}"));
    }
    let labelled = named.iter().any(|(_, labels)| {
        selector
            .equal
            .iter()
            .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\"")))
    });
    (!labelled).then(|| format!("no {wanted} series with {:?}", selector.equal))
}

async fn rules_and_dashboard_use_only_series_the_code_emits(backend: Backend) {
    let wanted: BTreeSet<Selector> = expressions()
        .iter()
        .flat_map(|e| selectors(e))
        // A read replica follows PostgreSQL only.
        .filter(|s| backend == Backend::Postgres || !s.metric.starts_with("leadpipe_read_replica_"))
        .collect();
    let names: BTreeSet<&str> = wanted.iter().map(|s| s.metric.as_str()).collect();
    // The figures the rules and the dashboard are for; each must be there.
    for name in [
        "leadpipe_inbox_oldest_unprocessed_age_seconds",
        "leadpipe_inbox_backlog",
        "leadpipe_inbox_events",
        "leadpipe_outbox_deliveries",
        "leadpipe_reconcile_missed_total",
        "leadpipe_reconcile_records_total",
        "leadpipe_source_quiet_seconds",
        "leadpipe_source_usual_gap_seconds",
        "leadpipe_source_reconciled_records",
        "leadpipe_source_missed_records",
        "leadpipe_webhook_deliveries_total",
        "leadpipe_metrics_gauges_age_seconds",
        "leadpipe_http_request_duration_seconds_bucket",
        "leadpipe_rate_limited_total",
    ] {
        assert!(names.contains(name), "{name} is in neither file: {names:?}");
    }

    // Two failures: the forged delivery below, then one bad token.
    let settings = HttpSettings {
        auth_fail_per_minute: 2,
        ..HttpSettings::for_tests()
    };
    let mut app = match backend {
        Backend::Sqlite => TestApp::spawn_with(backend, settings).await,
        // Reads from the standby scripts/test starts, for the replica series.
        Backend::Postgres => {
            let url = fresh_postgres_database().await;
            let read_url = leadpipe_tests::replica_url(&url);
            TestApp::spawn_on_postgres(
                url,
                HttpSettings {
                    database_read_url: Some(read_url),
                    ..settings
                },
            )
            .await
        }
    };
    app.start_workers(workers::WorkerSettings::for_tests());
    // Counters are process-wide and the two backends run at once: each
    // run counts under its own source.
    let source = &format!(
        "contract-{}",
        uuid::Uuid::new_v4().simple().to_string().get(..8).unwrap()
    );

    // A lead over the API.
    let intake = app.token(Role::Intake, Some("webform")).await;
    let response = app
        .api(&intake)
        .create_lead(&json!({"source": "webform", "source_ref": "c-1", "name": "Ada"}))
        .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());

    // A source with a pull API: record 0 arrives twice by webhook (accepted,
    // then a duplicate), records 1 and 2 never do.
    let fake = FakeSource::start(3).await.unwrap();
    let key = app.standard_source(source).await;
    let response = app
        .api(&app.admin_token().await)
        .patch_source(
            source,
            &json!({"pull_url": fake.pull_url, "pull_page_size": 10,
                    "expected_interval": "1h"}),
        )
        .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let (event_id, body) = fake.delivery(0);
    for expected in [202, 200] {
        let response = app.post_standard(source, &key, &event_id, &body).await;
        assert_eq!(response.status(), expected);
    }

    // A forged delivery: rejected.
    let forged = standard_headers(b"not-the-key-at-all-0123456789", "msg_forged", now(), &body);
    let response = app.post_webhook(source, &forged, &body).await;
    assert_eq!(response.status(), 401);

    // An event without a source_ref: dead on its first attempt.
    let bad = serde_json::to_vec(&json!({"type": "lead.created",
        "data": {"email": "no-id@example.com"}}))
    .unwrap();
    let response = app.post_standard(source, &key, "msg_no_ref", &bad).await;
    assert_eq!(response.status(), 202);
    let dead_id = response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    app.wait_for_state(dead_id, "dead").await;

    // A reconcile over the ops API: it creates the two missed records.
    let ops = app.token(Role::Ops, None).await;
    let run = app.reconcile_over_api(&ops, source, None).await;
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(run["missed"], 2, "{run}");

    // A token guesser: one 401, then 429.
    let statuses = [
        app.api("lp_not_a_token_1").get("/api/leads").await.status(),
        app.api("lp_not_a_token_2").get("/api/leads").await.status(),
    ];
    assert_eq!(statuses.map(|s| s.as_u16()), [401, 429]);

    // The gauges come from a background refresh: wait for one that saw the
    // dead event, then check every selector.
    let text = eventually(
        "every selected series, and the dead event in the gauge",
        WAIT,
        async || {
            let text = app.metrics().await;
            let scrape = series(&text);
            let gaps: Vec<String> = wanted.iter().filter_map(|s| missing(&scrape, s)).collect();
            // The gauge's line, with the dead event counted: the series can be
            // there at 0 before the worker has given up on it.
            let dead_seen = text.lines().any(|l| {
                l.starts_with("leadpipe_inbox_events{")
                    && l.contains(&format!("source=\"{source}\""))
                    && l.contains("state=\"dead\"")
                    && l.rsplit_once(' ')
                        .and_then(|(_, v)| v.parse::<f64>().ok())
                        .is_some_and(|v| v >= 1.0)
            });
            if !gaps.is_empty() {
                Err(format!(
                    "the rules or the dashboard select series the code does not emit:\n{}\n\nscrape:\n{text}",
                    gaps.join("\n")
                ))
            } else if !dead_seen {
                Err(format!("no dead event in the gauge yet:\n{text}"))
            } else {
                Ok(text)
            }
        },
    )
    .await;
    // The figures the alerts fire on, as this run produced them.
    let value = |metric: &str, labels: &[&str]| -> f64 {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(s, _)| {
                s.split_once('{').map_or(*s, |(m, _)| m) == metric
                    && labels.iter().all(|l| s.contains(l))
            })
            .map(|(_, v)| v.parse::<f64>().unwrap())
            .sum()
    };
    let src = format!("source=\"{source}\"");
    assert_eq!(
        value("leadpipe_inbox_events", &[&src, "state=\"dead\""]),
        1.0
    );
    assert_eq!(value("leadpipe_reconcile_missed_total", &[&src]), 2.0);
    assert_eq!(value("leadpipe_reconcile_records_total", &[&src]), 3.0);
    // The same run as the database has it, for every process to report.
    assert_eq!(value("leadpipe_source_reconciled_records", &[&src]), 3.0);
    assert_eq!(value("leadpipe_source_missed_records", &[&src]), 2.0);
    assert_eq!(value("leadpipe_source_usual_gap_seconds", &[&src]), 3600.0);
    assert_eq!(
        value(
            "leadpipe_webhook_deliveries_total",
            &[&src, "result=\"duplicate\""]
        ),
        1.0
    );
    assert!(value("leadpipe_rate_limited_total", &["limit=\"auth_failures\""]) >= 1.0);
    assert!(value("leadpipe_metrics_gauges_age_seconds", &[]).is_finite());
}

#[test]
fn selectors_are_read_from_promql() {
    let found = selectors(
        r#"sum by (source) (rate(leadpipe_webhook_deliveries_total{result="duplicate", source!="x"}[5m]))
           / histogram_quantile(0.99, leadpipe_http_request_duration_seconds_bucket{route=~"/a|/b"})
           and leadpipe:not_a_metric and my_leadpipe_other"#,
    );
    let found: Vec<_> = found.into_iter().collect();
    assert_eq!(
        found,
        vec![
            Selector {
                metric: "leadpipe_http_request_duration_seconds_bucket".into(),
                equal: vec![],
            },
            Selector {
                metric: "leadpipe_webhook_deliveries_total".into(),
                equal: vec![("result".into(), "duplicate".into())],
            },
        ]
    );
}
