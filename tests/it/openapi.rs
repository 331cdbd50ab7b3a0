//! The OpenAPI description: the served document is the committed
//! `api/openapi.json`, it describes every route actix serves (and nothing
//! else), and it holds together (references resolve, operations say who may
//! call them).
//!
//! After changing an endpoint, regenerate the committed copy with
//! `LEADPIPE_UPDATE_OPENAPI=1 cargo test -p leadpipe-tests --test it openapi::`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use actix_web::dev::Service as _;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{App, HttpRequest, web};
use leadpipe_tests::{Backend, TestApp};
use serde_json::Value;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/openapi.json");
const REGENERATE: &str =
    "LEADPIPE_UPDATE_OPENAPI=1 cargo test -p leadpipe-tests --test it openapi::";
const METHODS: &[&str] = &["get", "post", "put", "patch", "delete"];

async fn served(app: &TestApp) -> String {
    let response = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn served_document_is_the_committed_api_openapi_json() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let served = served(&app).await;
    let doc: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");

    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    if committed == served {
        return;
    }
    if std::env::var("LEADPIPE_UPDATE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(COMMITTED, &served).unwrap();
        eprintln!("rewrote api/openapi.json from GET /openapi.json");
        return;
    }
    let first_difference = served
        .lines()
        .zip(committed.lines())
        .enumerate()
        .find(|(_, (s, c))| s != c)
        .map(|(i, (s, c))| format!("line {}:\n  served:    {s}\n  committed: {c}", i + 1))
        .unwrap_or_else(|| {
            format!(
                "served {} lines, committed {} lines",
                served.lines().count(),
                committed.lines().count()
            )
        });
    panic!(
        "api/openapi.json is out of date with the code ({first_difference}).\n\
         Regenerate it with `{REGENERATE}`, review the diff and commit it."
    );
}

/// The leaf patterns of actix's resource tree (`HttpRequest::resource_map`),
/// read from its `Debug` output: actix has no public way to list routes.
fn leaf_patterns(dump: &str) -> BTreeSet<String> {
    assert!(
        !dump.contains("patterns: List("),
        "a resource has several patterns; teach leaf_patterns about it"
    );
    let lines: Vec<&str> = dump.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut leaves = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "ResourceMap {" {
            continue;
        }
        let depth = indent(line);
        while stack.last().is_some_and(|(d, _)| *d >= depth) {
            stack.pop();
        }
        let at = (i..lines.len())
            .find(|&j| lines[j].trim() == "patterns: Single(")
            .expect("ResourceMap Debug output has changed: no `patterns: Single(`");
        let pattern: String =
            serde_json::from_str(lines[at + 1].trim().trim_end_matches(',')).unwrap();
        let nodes = (i + 1..lines.len())
            .find(|&k| indent(lines[k]) == depth + 4 && lines[k].trim().starts_with("nodes:"))
            .expect("ResourceMap Debug output has changed: no `nodes:`");
        let prefix: String = stack.iter().map(|(_, p)| p.as_str()).collect();
        if lines[nodes].trim() == "nodes: None," {
            leaves.insert(format!("{prefix}{pattern}"));
        }
        stack.push((depth, pattern));
    }
    leaves
}

/// `/api/leads/{id}` → `/api/leads/1`.
fn concrete(pattern: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in pattern.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push('1');
            }
            '}' => in_param = false,
            _ if !in_param => out.push(c),
            _ => {}
        }
    }
    out
}

/// Every `(method, pattern)` the application's routes serve, as actix sees
/// them: the patterns from its resource tree, each probed with every method
/// on an in-process app that reports which pattern answered. A probe counts
/// when the same pattern matched (not another one) and neither the default
/// service nor a `405` answered. No state is configured and no token sent, so
/// no handler gets as far as doing anything.
async fn served_operations() -> BTreeSet<(String, String)> {
    let app = actix_web::test::init_service(
        App::new()
            .configure(|cfg| api::routes::configure(&mut api::routes::Routes::new(cfg), true))
            .route(
                "/__resource_map",
                web::get()
                    .to(|req: HttpRequest| async move { format!("{:#?}", req.resource_map()) }),
            )
            .default_service(web::to(|| async {
                actix_web::HttpResponse::NotFound()
                    .insert_header(("x-default-service", "1"))
                    .finish()
            }))
            .wrap_fn(|req, srv| {
                let call = srv.call(req);
                async move {
                    let mut res = call.await?;
                    let pattern = res.request().match_pattern().unwrap_or_default();
                    res.headers_mut().insert(
                        HeaderName::from_static("x-matched-pattern"),
                        HeaderValue::from_str(&pattern).unwrap(),
                    );
                    Ok(res)
                }
            }),
    )
    .await;
    let request = actix_web::test::TestRequest::get()
        .uri("/__resource_map")
        .to_request();
    let dump = actix_web::test::call_and_read_body(&app, request).await;
    let mut patterns = leaf_patterns(std::str::from_utf8(&dump).unwrap());
    patterns.remove("/__resource_map");
    assert!(
        patterns.len() > 20,
        "found only {patterns:?}: has ResourceMap's Debug output changed?"
    );

    let mut served = BTreeSet::new();
    for pattern in patterns {
        for method in METHODS {
            let method_upper = method.to_uppercase();
            let request = actix_web::test::TestRequest::default()
                .method(actix_web::http::Method::from_bytes(method_upper.as_bytes()).unwrap())
                .uri(&concrete(&pattern))
                .insert_header(("content-type", "application/json"))
                .set_payload("{}")
                .to_request();
            let response = actix_web::test::call_service(&app, request).await;
            let matched = response
                .headers()
                .get("x-matched-pattern")
                .unwrap()
                .to_str()
                .unwrap();
            let fallback = response.headers().contains_key("x-default-service");
            if matched == pattern && response.status() != 405 && !fallback {
                served.insert(((*method).to_owned(), pattern.clone()));
            }
        }
    }
    served
}

fn described_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(*method).is_some() {
                ops.insert(((*method).to_owned(), path.clone()));
            }
        }
    }
    ops
}

#[tokio::test]
async fn every_route_actix_serves_is_described_and_every_described_one_is_served() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc: Value = serde_json::from_str(&served(&app).await).unwrap();
    let described = described_operations(&doc);

    let serves = served_operations().await;
    let undocumented: Vec<_> = serves.difference(&described).collect();
    assert!(
        undocumented.is_empty(),
        "routes without an OpenAPI description: {undocumented:?}.\n\
         Give their handlers `#[utoipa::path(...)]` and a route attribute (`#[get(\"/..\")]`), \
         register them with `Routes::service`, then run `{REGENERATE}`."
    );
    let unserved: Vec<_> = described.difference(&serves).collect();
    assert!(
        unserved.is_empty(),
        "the OpenAPI document describes routes the app does not serve: {unserved:?}"
    );
}

/// Operations anyone may call; every other one needs the bearer token.
const PUBLIC: &[&str] = &[
    "front_page",
    "front_app_js",
    "front_app_css",
    "api_reference",
    "api_reference_js",
    "healthz",
    "readyz",
    "openapi",
    "receive_webhook",
    "webhook_handshake",
    "sign_in",
];

#[tokio::test]
async fn every_operation_says_who_may_call_it_and_answers_problems_on_errors() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc: Value = serde_json::from_str(&served(&app).await).unwrap();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(op) = item.get(*method) else {
                continue;
            };
            let id = op["operationId"].as_str().unwrap();
            let description = op["description"].as_str().unwrap_or("");
            assert!(
                description.contains("**Roles:**"),
                "{method} {path} ({id}): the description must say who may call it (**Roles:** …)"
            );
            // The roles that may call it, as the bearer requirement's
            // scopes (the session's own operations: the session's).
            let requirement = &op["security"][0];
            let secured = requirement["bearer"]
                .as_array()
                .or_else(|| requirement["session"].as_array())
                .is_some_and(|roles| !roles.is_empty());
            assert_eq!(
                secured,
                !PUBLIC.contains(&id),
                "{method} {path} ({id}): bearer security expected unless public"
            );
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.as_str() < "400" || response.get("$ref").is_some() {
                    continue;
                }
                assert_eq!(
                    response["content"]["application/problem+json"]["schema"]["$ref"],
                    "#/components/schemas/Problem",
                    "{method} {path} {status}: errors are application/problem+json"
                );
            }
            if secured {
                for status in ["401", "403"] {
                    assert!(
                        op["responses"].get(status).is_some(),
                        "{method} {path}: {status}"
                    );
                }
            }
        }
    }
}

fn collect_refs(value: &Value, refs: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        refs.insert(r.clone());
                    }
                    _ => collect_refs(v, refs),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

#[tokio::test]
async fn every_reference_resolves_and_the_contract_headers_are_described() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let text = served(&app).await;
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut refs = BTreeSet::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for reference in &refs {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("external reference {reference}"));
        assert!(
            doc.pointer(pointer).is_some(),
            "{reference} does not resolve"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for header in [
        "Idempotency-Key",
        "Idempotent-Replayed",
        "If-Match",
        "ETag",
        "Location",
        "X-Request-Id",
        "Retry-After",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "Stripe-Signature",
        "X-Hub-Signature-256",
        "X-Signature",
    ] {
        assert!(
            text.contains(&format!("\"{header}\"")),
            "the document never names the {header} header"
        );
    }
    let problem_types = doc["components"]["schemas"]["ProblemType"]["enum"]
        .as_array()
        .unwrap();
    assert!(problem_types.contains(&Value::from("/problems/illegal-transition")));
    let info = doc["info"]["description"].as_str().unwrap();
    assert!(info.contains("72 hours"), "Idempotency-Key retention");
}

/// Every `in: path` parameter is a `{name}` of its path and every `{name}`
/// has one: client generators refuse an operation where they differ.
#[tokio::test]
async fn path_parameters_match_the_path_template() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc: Value = serde_json::from_str(&served(&app).await).unwrap();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let templated: BTreeSet<String> = path
            .split('{')
            .skip(1)
            .filter_map(|part| part.split_once('}').map(|(name, _)| name.to_owned()))
            .collect();
        for method in METHODS {
            let Some(op) = item.get(*method) else {
                continue;
            };
            let declared: BTreeSet<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                declared, templated,
                "{method} {path}: path parameters differ from the path template"
            );
        }
    }
}

/// Client generators (openapi-python-client) make one model per schema and
/// per inline object: a one-element `allOf` copies its target, inline models
/// included, under a second name. Request bodies all have a schema.
#[tokio::test]
async fn schemas_are_plain_references_and_every_body_has_a_schema() {
    fn walk(value: &Value, at: &str) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Array(all)) = map.get("allOf") {
                    assert!(all.len() > 1, "{at}: a one-element allOf; use a $ref");
                }
                for (key, v) in map {
                    walk(v, &format!("{at}/{key}"));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc: Value = serde_json::from_str(&served(&app).await).unwrap();
    walk(&doc, "#");
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(body) = item.get(*method).and_then(|op| op.get("requestBody")) else {
                continue;
            };
            for (content_type, media) in body["content"].as_object().unwrap() {
                assert!(
                    media.get("schema").is_some(),
                    "{method} {path}: the {content_type} request body has no schema"
                );
            }
        }
    }
}

/// The problem tables in the docs are the catalogue in `api/src/http/error.rs`,
/// between their markers; `LEADPIPE_UPDATE_DOCS=1` rewrites them.
#[test]
fn the_docs_problem_tables_are_the_catalogue() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let update = std::env::var("LEADPIPE_UPDATE_DOCS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (file, marker, table) in [
        (
            "docs/guide/errors.md",
            "problem-table",
            api::http::error::problem_table_markdown(),
        ),
        (
            "README.md",
            "problem-table-compact",
            api::http::error::problem_table_compact_markdown(),
        ),
    ] {
        let path = format!("{root}/{file}");
        let text = std::fs::read_to_string(&path).unwrap();
        let open = format!("<!-- {marker}:");
        let close = format!("<!-- /{marker} -->");
        let start = text
            .find(&open)
            .unwrap_or_else(|| panic!("{file}: no `{open}` marker"));
        let start = start + text[start..].find("-->\n").unwrap() + "-->\n".len();
        let end = text
            .find(&close)
            .unwrap_or_else(|| panic!("{file}: no `{close}` marker"));
        if text[start..end] == table {
            continue;
        }
        if update {
            std::fs::write(&path, format!("{}{table}{}", &text[..start], &text[end..])).unwrap();
            eprintln!("rewrote the problem table in {file}");
        } else {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "the problem table in {stale:?} differs from the catalogue in api/src/http/error.rs \
         (PROBLEMS). Regenerate with `LEADPIPE_UPDATE_DOCS=1 cargo test -p leadpipe-tests \
         --test it openapi::`, review the diff and commit it."
    );
}

/// One `type` is one kind of problem (RFC 9457): a client that branches on
/// it must not find two titles, two statuses or two rows for it.
#[test]
fn each_problem_type_is_one_row_of_the_catalogue() {
    let mut seen = BTreeSet::new();
    for problem in api::http::error::PROBLEMS {
        assert!(
            seen.insert(problem.slug),
            "/problems/{} appears twice in PROBLEMS",
            problem.slug
        );
    }
}

/// The document's promise about answers, checked against real ones: each
/// answer's body fits the schema the document gives for its operation,
/// status and content type. `components` is put beside the schema, so its
/// `#/components/schemas/…` references resolve as they do in the document
/// (OpenAPI 3.1 schemas are JSON Schema 2020-12).
struct Contract {
    doc: Value,
    app: TestApp,
}

impl Contract {
    /// Sends `request`, checks its answer against `method template` and
    /// returns the status and body.
    async fn send(
        &self,
        method: &str,
        template: &str,
        request: reqwest::RequestBuilder,
    ) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {template} {status}: not JSON ({e}): {text}"));
        self.check(method, template, status, &content_type, &body);
        (status, body)
    }

    fn check(&self, method: &str, template: &str, status: u16, content_type: &str, body: &Value) {
        let at = format!("{} {template} {status}", method.to_uppercase());
        let op = &self.doc["paths"][template][method];
        assert!(op.is_object(), "{at}: the operation is not described");
        let mut response = op["responses"]
            .get(status.to_string())
            .or_else(|| op["responses"].get("default"))
            .unwrap_or_else(|| panic!("{at}: not a documented answer: {body}"));
        if let Some(reference) = response["$ref"].as_str() {
            response = self.doc.pointer(&reference[1..]).unwrap();
        }
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let schema = response["content"][media]["schema"].clone();
        assert!(
            schema.is_object(),
            "{at}: the document gives no {media:?} schema: {body}"
        );
        let Value::Object(mut schema) = schema else {
            unreachable!()
        };
        schema.insert("components".into(), self.doc["components"].clone());
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&Value::Object(schema))
            .unwrap_or_else(|e| panic!("{at}: the schema does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{e} (at \"{}\")", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{at}: the answer does not fit the document:\n  {}\nanswer: {body}",
            errors.join("\n  ")
        );
    }

    fn request(&self, method: reqwest::Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.app
            .client
            .request(method, self.app.url(path))
            .bearer_auth(token)
    }
}

leadpipe_tests::on_both_backends!(every_answer_the_intake_door_gives_fits_the_document);

/// Every outcome of `POST /api/leads` (created, updated, unchanged, stale,
/// a keyed replay, suppressed after erasure) and a sample of the other
/// answers fit the schemas the document gives them.
async fn every_answer_the_intake_door_gives_fits_the_document(backend: Backend) {
    use reqwest::Method;
    use serde_json::json;

    let app = TestApp::spawn(backend).await;
    let doc: Value = serde_json::from_str(&served(&app).await).unwrap();
    let intake = app.token(domain::auth::Role::Intake, Some("webform")).await;
    let sales = app.token(domain::auth::Role::Sales, None).await;
    let ops = app.token(domain::auth::Role::Ops, None).await;
    let admin = app.token(domain::auth::Role::Admin, None).await;
    let api = Contract { doc, app };
    let post = |record: Value| {
        api.request(Method::POST, "/api/leads", &intake)
            .json(&record)
    };
    let lead = |name: &str, at: &str| {
        json!({"source": "webform", "source_ref": "form-1", "name": name,
               "email": "ada@example.com", "source_updated_at": at})
    };

    let (status, created) = api
        .send(
            "post",
            "/api/leads",
            post(lead("Ada", "2026-01-02T00:00:00Z")),
        )
        .await;
    assert_eq!(
        (status, created["outcome"].as_str()),
        (201, Some("created"))
    );
    let id = created["id"].as_i64().unwrap();
    for (record, outcome) in [
        (lead("Ada", "2026-01-02T00:00:00Z"), "unchanged"),
        (lead("Ada Lovelace", "2026-01-03T00:00:00Z"), "updated"),
        (lead("A. L.", "2026-01-01T00:00:00Z"), "stale"),
    ] {
        let (status, body) = api.send("post", "/api/leads", post(record)).await;
        assert_eq!((status, body["outcome"].as_str()), (200, Some(outcome)));
    }
    // A keyed request and its replay.
    for _ in 0..2 {
        let keyed = post(json!({"source": "webform", "source_ref": "form-2"}))
            .header("Idempotency-Key", "fits-the-document-1");
        let (status, body) = api.send("post", "/api/leads", keyed).await;
        assert_eq!((status, body["outcome"].as_str()), (201, Some("created")));
    }

    // The reads and writes around a lead.
    let path = format!("/api/leads/{id}");
    let (status, _) = api
        .send(
            "get",
            "/api/leads",
            api.request(Method::GET, "/api/leads", &sales),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = api
        .send(
            "get",
            "/api/leads/{id}",
            api.request(Method::GET, &path, &sales),
        )
        .await;
    assert_eq!(status, 200);
    let transition = api
        .request(Method::POST, &format!("{path}/transitions"), &sales)
        .json(&json!({"to": "contacted"}));
    let (status, _) = api
        .send("post", "/api/leads/{id}/transitions", transition)
        .await;
    assert_eq!(status, 200);
    let illegal = api
        .request(Method::POST, &format!("{path}/transitions"), &sales)
        .json(&json!({"to": "new"}));
    let (status, _) = api
        .send("post", "/api/leads/{id}/transitions", illegal)
        .await;
    assert_eq!(status, 409);
    let note = api
        .request(Method::POST, &format!("{path}/notes"), &sales)
        .header("Idempotency-Key", "fits-the-document-2")
        .json(&json!({"text": "called"}));
    let (status, _) = api.send("post", "/api/leads/{id}/notes", note).await;
    assert_eq!(status, 201);
    let activities = api.request(Method::GET, &format!("{path}/activities"), &sales);
    let (status, _) = api
        .send("get", "/api/leads/{id}/activities", activities)
        .await;
    assert_eq!(status, 200);
    for (template, token) in [
        ("/api/me", &intake),
        ("/api/principals", &sales),
        ("/api/ops/stats", &ops),
    ] {
        let (status, _) = api
            .send("get", template, api.request(Method::GET, template, token))
            .await;
        assert_eq!(status, 200, "{template}");
    }

    // Refusals: problems, in the shape the document gives them.
    let (status, _) = api
        .send(
            "post",
            "/api/leads",
            post(json!({"source": "webform", "email": 5})),
        )
        .await;
    assert!(status == 400 || status == 422, "{status}");
    let (status, _) = api
        .send(
            "get",
            "/api/leads/{id}",
            api.request(Method::GET, "/api/leads/999999", &sales),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = api
        .send(
            "get",
            "/api/leads",
            api.request(Method::GET, "/api/leads", &intake),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = api
        .send(
            "get",
            "/api/leads",
            api.request(Method::GET, "/api/leads", "not-a-token"),
        )
        .await;
    assert_eq!(status, 401);

    // Erased: the key's next arrival is `suppressed`, with no lead.
    let erase = api.request(Method::DELETE, &format!("{path}?reason=asked"), &admin);
    let (status, _) = api.send("delete", "/api/leads/{id}", erase).await;
    assert_eq!(status, 200);
    let (status, suppressed) = api
        .send(
            "post",
            "/api/leads",
            post(lead("Ada", "2026-02-01T00:00:00Z")),
        )
        .await;
    assert_eq!(
        (status, &suppressed),
        (200, &json!({"outcome": "suppressed"}))
    );
}

/// Strings a generated example shows where no one wrote a real one.
fn placeholders(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::String(s) if s == "string" => found.push(at.to_owned()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                placeholders(item, &format!("{at}/{i}"), found);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                placeholders(item, &format!("{at}/{key}"), found);
            }
        }
        _ => {}
    }
}

/// `/docs` shows each JSON request body with a realistic example, not
/// `"string"` for every field: one an author wrote, that fits the schema.
#[test]
fn every_json_request_body_has_a_realistic_example_that_fits_its_schema() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(COMMITTED).unwrap()).unwrap();
    let mut problems = Vec::new();
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(body) = operations
                .get(*method)
                .and_then(|op| op.pointer("/requestBody/content/application~1json"))
            else {
                continue;
            };
            let at = format!("{} {path}", method.to_uppercase());
            check_example(&doc, &at, body, &mut problems);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What is wrong with `media`'s example (a request body's or an answer's
/// JSON content): missing, a `"string"` placeholder, or not fitting its
/// schema.
fn check_example(doc: &Value, at: &str, media: &Value, problems: &mut Vec<String>) {
    let Some(example) = media.get("example") else {
        problems.push(format!("{at}: no example"));
        return;
    };
    let mut found = Vec::new();
    placeholders(example, "", &mut found);
    if !found.is_empty() {
        problems.push(format!("{at}: \"string\" at {found:?}"));
    }
    let Value::Object(mut schema) = media["schema"].clone() else {
        problems.push(format!("{at}: no schema"));
        return;
    };
    schema.insert("components".into(), doc["components"].clone());
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&Value::Object(schema))
        .unwrap();
    for error in validator.iter_errors(example) {
        problems.push(format!(
            "{at}: the example does not fit: {error} (at \"{}\")",
            error.instance_path()
        ));
    }
}

/// `/docs` shows each JSON success answer with a realistic example too: one
/// an author wrote, that fits the schema, so a reader sees what comes back.
#[test]
fn every_json_success_response_has_a_realistic_example_that_fits_its_schema() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(COMMITTED).unwrap()).unwrap();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(responses) = operations
                .get(*method)
                .and_then(|op| op["responses"].as_object())
            else {
                continue;
            };
            for (status, response) in responses {
                if !status.starts_with('2') {
                    continue;
                }
                let at = format!("{} {path} {status}", method.to_uppercase());
                let response = match response["$ref"].as_str() {
                    Some(reference) => doc.pointer(&reference[1..]).unwrap(),
                    None => response,
                };
                let Some(media) = response.pointer("/content/application~1json") else {
                    continue;
                };
                checked += 1;
                check_example(&doc, &at, media, &mut problems);
            }
        }
    }
    assert!(checked > 80, "found only {checked} JSON success answers");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Two types published under one schema name: utoipa keeps one of them
/// silently, and every `$ref` to the other then describes the wrong shape.
#[test]
fn no_two_answer_types_share_a_schema_name() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    let mut clashes = Vec::new();
    for crate_dir in ["api/src", "domain/src"] {
        for path in rust_files(&std::path::Path::new(root).join(crate_dir)) {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut deriving = false;
            let mut renamed: Option<String> = None;
            for line in text.lines().map(str::trim) {
                if line.starts_with("#[derive(") && line.contains("ToSchema") {
                    deriving = true;
                    renamed = None;
                } else if deriving && let Some(rest) = line.strip_prefix("#[schema(as = ") {
                    renamed = rest.split([')', ',']).next().map(str::to_owned);
                } else if deriving
                    && let Some(rest) = ["pub struct ", "pub enum ", "struct ", "enum "]
                        .iter()
                        .find_map(|p| line.strip_prefix(p))
                {
                    let own: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let name = renamed.take().unwrap_or_else(|| own.clone());
                    let at = format!("{} ({own})", path.display());
                    if let Some(before) = seen.insert(name.clone(), at.clone()) {
                        clashes.push(format!("{name}: {before} and {at}"));
                    }
                    deriving = false;
                }
            }
        }
    }
    assert!(clashes.is_empty(), "{}", clashes.join("\n"));
}

fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}
