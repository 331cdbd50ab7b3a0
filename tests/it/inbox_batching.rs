//! Batched inbox processing: a poisoned event fails alone, several workers
//! share one backlog without taking an event twice, senders that outrun the
//! workers are refused before processing starves, and a stored event wakes
//! the workers without waiting for a poll.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use api::config::HttpSettings;
use chrono::Utc;
use domain::auth::Role;
use domain::entities::{inbox_event, lead};
use domain::inbound::inbox::batch::{BatchPath, apply_batch, claim_batch};
use domain::inbound::inbox::process::{Applied, claim};
use domain::inbound::inbox::receive::{Delivery, receive};
use leadpipe_tests::poison::poison_lead_inserts;
use leadpipe_tests::raw_http::read_answer;
use leadpipe_tests::webhooks::{
    RunningWorkers, ack_id, lead_event, now, standard_headers, woken_only_settings,
};
use leadpipe_tests::{Backend, TestApp, assert_problem, eventually, on_both_backends};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter};
use workers::WorkerSettings;

on_both_backends!(
    a_poisoned_event_fails_alone_while_its_batch_commits_together,
    two_workers_drain_one_backlog_taking_each_event_once,
    a_burst_past_the_backlog_limit_is_refused_and_processing_advances,
    a_refused_delivery_keeps_the_senders_connection,
    a_stored_event_wakes_the_workers_without_polling,
    an_event_stored_while_a_worker_waits_to_write_is_processed_after_its_receipt,
    a_batch_writes_no_event_whose_claim_another_worker_took_over,
    a_skipped_event_taken_over_mid_batch_is_left_to_its_taker,
    a_stopping_worker_finishes_the_pass_it_started,
);

async fn count_in_state(app: &TestApp, state: &str) -> u64 {
    inbox_event::Entity::find()
        .filter(inbox_event::Column::State.eq(state))
        .count(&app.db)
        .await
        .unwrap()
}

async fn a_poisoned_event_fails_alone_while_its_batch_commits_together(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    poison_lead_inserts(&app, "form-poison").await;
    let mut ids = Vec::new();
    for i in 0..9 {
        if i == 4 {
            let body = lead_event("form-poison", "bad@example.com", "2026-11-30T10:00:00Z");
            ids.push(
                ack_id(
                    app.post_standard("webform", &key, "msg_poison", &body)
                        .await,
                )
                .await,
            );
        }
        ids.push(app.post_numbered_lead_event(&key, i).await);
    }
    let poisoned = ids[4];

    // Driven by hand, one batch per call, as a woken worker does.
    let mut settings = WorkerSettings::for_tests();
    settings.retry.max_attempts = 2;
    let processor = app.processor(settings);
    assert_eq!(processor.drain_once().await.unwrap(), 10);

    let mut stamps = Vec::new();
    for &id in ids.iter().filter(|&&id| id != poisoned) {
        let event = app.inbox_event(id).await;
        assert_eq!((event.state.as_str(), event.attempts), ("processed", 1));
        stamps.push(event.processed_at.unwrap());
    }
    // One transaction wrote them all: one processing time.
    stamps.dedup();
    assert_eq!(stamps.len(), 1, "{stamps:?}");
    assert_eq!(app.count(lead::Entity).await, 9);

    let failed = app.inbox_event(poisoned).await;
    assert_eq!((failed.state.as_str(), failed.attempts), ("failed", 1));
    assert!(failed.last_error.unwrap().contains("poisoned row"));
    let due = failed.next_attempt_at.unwrap();

    // Its retry: the last attempt, so it is dead with its reason.
    let wait = (due - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(20)).await;
    assert_eq!(processor.drain_once().await.unwrap(), 1);
    let dead = app.inbox_event(poisoned).await;
    assert_eq!((dead.state.as_str(), dead.attempts), ("dead", 2));
    let reason = dead.last_error.unwrap();
    assert!(reason.starts_with("gave up after 2 attempts: "), "{reason}");
    assert!(reason.contains("poisoned row"), "{reason}");
    assert_eq!(app.count(lead::Entity).await, 9);
    assert_eq!(processor.drain_once().await.unwrap(), 0);
}

/// A worker whose lease ran out mid-batch must not end the attempt another
/// worker has taken over; its other events still commit. The taker's batch,
/// a retried event beside a first attempt, is written whole.
async fn a_batch_writes_no_event_whose_claim_another_worker_took_over(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.post_numbered_lead_event(&key, i).await);
    }
    let lease = Duration::from_secs(60);
    let policy = WorkerSettings::for_tests().retry;
    let slow = claim_batch(&app.db, "slow-worker", Utc::now(), lease, 100)
        .await
        .unwrap();
    assert_eq!(slow.len(), 5);
    // As seen after the lease ran out: another worker takes the middle one.
    let later = Utc::now() + chrono::Duration::seconds(61);
    let taken = claim(&app.db, ids[2], "other-worker", later, lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.attempts, 2);

    let (settled, path) = apply_batch(&app.db, &slow, &policy).await.unwrap();
    assert_eq!(path, BatchPath::Split);
    for done in &settled {
        let lost = done.id == ids[2];
        assert_eq!(
            matches!(done.result, Ok(Applied::LostClaim)),
            lost,
            "{done:?}"
        );
        let event = app.inbox_event(done.id).await;
        if lost {
            assert_eq!((event.state.as_str(), event.attempts), ("processing", 2));
            assert_eq!(event.locked_by.as_deref(), Some("other-worker"));
            assert_eq!(event.lead_id, None);
        } else {
            assert_eq!((event.state.as_str(), event.attempts), ("processed", 1));
            assert_eq!(event.outcome.as_deref(), Some("created"));
        }
    }
    assert_eq!(app.count(lead::Entity).await, 4);

    // The taker's batch: its retried event and a new one, attempts 2 and 1.
    let new = app.post_numbered_lead_event(&key, 5).await;
    let fresh = claim(&app.db, new, "other-worker", Utc::now(), lease)
        .await
        .unwrap()
        .unwrap();
    let (settled, path) = apply_batch(&app.db, &[taken, fresh], &policy)
        .await
        .unwrap();
    assert_eq!(path, BatchPath::Whole);
    assert!(
        settled
            .iter()
            .all(|done| matches!(done.result, Ok(Applied::Processed { .. }))),
        "{settled:?}"
    );
    for (id, attempts) in [(ids[2], 2), (new, 1)] {
        let event = app.inbox_event(id).await;
        assert_eq!(
            (event.state.as_str(), event.attempts, event.locked_by),
            ("processed", attempts, None)
        );
        assert!(event.lead_id.is_some());
    }
    assert_eq!(app.count(lead::Entity).await, 6);
}

/// The same for an event the batch would skip (its type was allowed when it
/// arrived, no longer when claimed): the batch is written whole, the taken
/// event is left as its taker holds it.
async fn a_skipped_event_taken_over_mid_batch_is_left_to_its_taker(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(app.post_numbered_lead_event(&key, i).await);
    }
    let body =
        serde_json::to_vec(&serde_json::json!({"type": "lead.deleted", "data": {"id": "form-9"}}))
            .unwrap();
    let deleted = ack_id(app.post_standard("webform", &key, "msg_del", &body).await).await;
    let narrowed = app
        .api(&app.admin_token().await)
        .patch_source(
            "webform",
            &serde_json::json!({"allowed_event_types": ["lead.created"]}),
        )
        .await;
    assert!(narrowed.status().is_success(), "{}", narrowed.status());
    let lease = Duration::from_secs(60);
    let policy = WorkerSettings::for_tests().retry;
    let slow = claim_batch(&app.db, "slow-worker", Utc::now(), lease, 100)
        .await
        .unwrap();
    assert_eq!(slow.len(), 4);
    let later = Utc::now() + chrono::Duration::seconds(61);
    claim(&app.db, deleted, "other-worker", later, lease)
        .await
        .unwrap()
        .unwrap();

    let (settled, path) = apply_batch(&app.db, &slow, &policy).await.unwrap();
    assert_eq!(path, BatchPath::Whole);
    for done in &settled {
        let lost = done.id == deleted;
        assert_eq!(
            matches!(done.result, Ok(Applied::LostClaim)),
            lost,
            "{done:?}"
        );
    }
    let taken = app.inbox_event(deleted).await;
    assert_eq!(
        (
            taken.state.as_str(),
            taken.attempts,
            taken.locked_by.as_deref()
        ),
        ("processing", 2, Some("other-worker"))
    );
    assert_eq!(taken.processed_at, None);
    for id in ids {
        let event = app.inbox_event(id).await;
        assert_eq!((event.state.as_str(), event.locked_by), ("processed", None));
    }
    assert_eq!(app.count(lead::Entity).await, 3);
}

/// On SQLite a receipt and a worker's claim wait for this process's write
/// turn, in order. An event stored while the worker waited behind it must
/// not be stamped processed before it was received (the receipt-to-processed
/// figures would come out negative).
async fn an_event_stored_while_a_worker_waits_to_write_is_processed_after_its_receipt(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let processor = app.processor(WorkerSettings::for_tests());
    let body = lead_event("form-late", "late@example.com", "2026-11-30T10:00:00Z");
    // Another writer holds the turn (on PostgreSQL there is none to hold):
    // the receipt queues for it, then the worker does.
    let turn = app.db.write_turn().await;
    let (response, claimed, ()) = tokio::join!(
        app.post_standard("webform", &key, "msg_late", &body),
        // The order tested: the receipt queues for the turn, the drain's
        // pass starts, and only then is the turn given back.
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            processor.drain_once().await.unwrap()
        },
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(turn);
        },
    );
    let id = ack_id(response).await;
    if claimed == 0 {
        // It claimed before the event was stored: the next batch takes it.
        assert_eq!(processor.drain_once().await.unwrap(), 1);
    }

    let event = app.inbox_event(id).await;
    assert_eq!(event.state, "processed");
    let processed = event.processed_at.unwrap();
    assert!(
        processed >= event.received_at,
        "processed at {processed}, received at {}",
        event.received_at
    );
}

async fn two_workers_drain_one_backlog_taking_each_event_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    // 60 leads, each sent twice (a newer version second): 120 events.
    let posts = (0..120).map(|i| {
        let (lead, version) = (i % 60, i / 60);
        let body = lead_event(
            &format!("form-{lead}"),
            &format!("v{version}-{lead}@example.com"),
            &format!("2026-11-30T1{version}:00:00Z"),
        );
        let headers = standard_headers(&key, &format!("msg_{i}"), now(), &body);
        let app = &app;
        async move { ack_id(app.post_webhook("webform", &headers, &body).await).await }
    });
    let ids = futures::future::join_all(posts).await;
    assert_eq!(ids.len(), 120);

    // Two worker runtimes (as two processes would), small batches, so their
    // claims interleave.
    let mut settings = WorkerSettings::for_tests();
    settings.batch_size = 7;
    let first = RunningWorkers::start(app.db.clone(), settings.clone());
    let second = RunningWorkers::start(app.db.clone(), settings);
    eventually(
        "every event processed",
        Duration::from_secs(20),
        async || count_in_state(&app, "processed").await == 120,
    )
    .await;
    first.stop().await;
    second.stop().await;

    let events = inbox_event::Entity::find().all(&app.db).await.unwrap();
    // Exactly once each: one attempt, by one of the two workers.
    assert!(
        events.iter().all(|e| e.attempts == 1),
        "an event was claimed twice"
    );
    let leads = lead::Entity::find().all(&app.db).await.unwrap();
    assert_eq!(leads.len(), 60);
    let mut changes: HashMap<i64, i64> = HashMap::new();
    for event in &events {
        if matches!(event.outcome.as_deref(), Some("created" | "updated")) {
            *changes.entry(event.lead_id.unwrap()).or_default() += 1;
        }
    }
    for lead in leads {
        // The newer version won, whichever worker saw it first, and the
        // version counts exactly the changes applied.
        let n = lead.source_ref.trim_start_matches("form-");
        assert_eq!(
            lead.email.as_deref(),
            Some(format!("v1-{n}@example.com").as_str())
        );
        assert_eq!(lead.version, changes[&lead.id], "lead {}", lead.source_ref);
    }
}

async fn a_burst_past_the_backlog_limit_is_refused_and_processing_advances(backend: Backend) {
    let mut app = TestApp::spawn_with(
        backend,
        HttpSettings {
            inbox_backlog_limit: 30,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let key = Arc::new(app.standard_source("webform").await);

    // No workers yet: the backlog fills to the limit, then deliveries are
    // refused and nothing more is stored. (A receipt racing the background
    // count may be counted twice, so the refusal may come a little early.)
    let mut filled = 0;
    let refused = loop {
        let body = lead_event(
            &format!("form-{filled}"),
            "ada@example.com",
            "2026-11-30T10:00:00Z",
        );
        let sent = std::time::Instant::now();
        let response = app
            .post_standard("webform", &key, &format!("msg_{filled}"), &body)
            .await;
        if response.status() != 202 || filled == 40 {
            break (response, sent.elapsed());
        }
        filled += 1;
    };
    let (refused, refused_after) = refused;
    assert!((25..=30).contains(&filled), "refused after {filled} events");
    // A sender that resends at once, not after Retry-After, is slowed by
    // the hold instead of being refused as fast as the server can answer.
    assert!(
        refused_after >= api::http::admission::REFUSAL_HOLD,
        "refused after {refused_after:?}"
    );
    assert_eq!(refused.headers()["retry-after"], "1");
    let problem = assert_problem(refused, 503, "/problems/inbox-backlog-full").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("limit 30"),
        "{problem}"
    );
    assert_eq!(app.count(inbox_event::Entity).await, filled);

    // Senders keep going as fast as they can while the workers run.
    let sending = Arc::new(AtomicBool::new(true));
    let (accepted, rejected) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let senders: Vec<_> = (0..4)
        .map(|sender| {
            let (client, url, key) = (
                app.client.clone(),
                app.url("/webhooks/webform"),
                key.clone(),
            );
            let (sending, accepted, rejected) =
                (sending.clone(), accepted.clone(), rejected.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while sending.load(Ordering::Relaxed) {
                    i += 1;
                    let body = lead_event(
                        &format!("burst-{sender}-{i}"),
                        "b@example.com",
                        "2026-11-30T10:00:00Z",
                    );
                    let mut request = client.post(&url).body(body.clone());
                    for (name, value) in
                        standard_headers(&key, &format!("msg_b{sender}_{i}"), now(), &body)
                    {
                        request = request.header(name, value);
                    }
                    match request.send().await.unwrap().status().as_u16() {
                        202 => accepted.fetch_add(1, Ordering::Relaxed),
                        503 => rejected.fetch_add(1, Ordering::Relaxed),
                        other => panic!("unexpected status {other}"),
                    };
                }
            })
        })
        .collect();
    app.start_workers(WorkerSettings::for_tests());
    // Processing advances while the senders are still sending.
    eventually(
        "processing advanced during the burst",
        Duration::from_secs(20),
        async || count_in_state(&app, "processed").await >= 60,
    )
    .await;
    assert!(sending.load(Ordering::Relaxed));
    // The burst goes on a little longer while the workers run (load, not
    // a wait for something).
    tokio::time::sleep(Duration::from_millis(300)).await;
    sending.store(false, Ordering::Relaxed);
    for sender in senders {
        sender.await.unwrap();
    }
    assert!(
        rejected.load(Ordering::Relaxed) > 0,
        "the burst was never refused"
    );
    assert!(
        accepted.load(Ordering::Relaxed) > 0,
        "nothing was accepted once workers ran"
    );
    let metrics = app.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("leadpipe_webhook_deliveries_total")
                && l.contains("reason=\"backlog_full\"")),
        "no backlog_full count in the metrics"
    );
    // Whatever was accepted is processed; nothing refused was stored.
    let stored = app.count(inbox_event::Entity).await;
    assert_eq!(stored, filled + accepted.load(Ordering::Relaxed));
    eventually("the backlog drained", Duration::from_secs(20), async || {
        count_in_state(&app, "processed").await == stored
    })
    .await;
    app.stop_workers().await;
}

/// One signed delivery on an open keep-alive connection: the answer's status
/// and whether the server announced it closes, or `None` when the server
/// had already closed the connection.
async fn deliver_on(stream: &mut TcpStream, key: &[u8], msg_id: &str) -> Option<(u16, bool)> {
    let body = lead_event(msg_id, "kept@example.com", "2026-11-30T10:00:00Z");
    let mut request = format!(
        "POST /webhooks/webform HTTP/1.1\r\nHost: leadpipe\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in standard_headers(key, msg_id, now(), &body) {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    stream.write_all(&body).await.ok()?;
    read_answer(stream).await
}

async fn a_refused_delivery_keeps_the_senders_connection(backend: Backend) {
    // One event fills the backlog; three deliveries empty the rate
    // limit's burst (it refills one a second).
    let app = TestApp::spawn_with(
        backend,
        HttpSettings {
            inbox_backlog_limit: 1,
            webhook_rate: 1,
            webhook_burst: 3,
            ..HttpSettings::for_tests()
        },
    )
    .await;
    let key = app.standard_source("webform").await;
    let address = app.url("").trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).await.unwrap();

    // Stored; refused twice for the backlog, then twice for the rate (or
    // for the backlog, should a slow machine let a token come back): each
    // answer on the one connection the sender opened.
    for n in 0..5 {
        let answer = deliver_on(&mut stream, &key, &format!("msg_kept_{n}")).await;
        let Some((status, closing)) = answer else {
            panic!("delivery {n}: the server closed the connection after a refusal");
        };
        let expected: &[u16] = match n {
            0 => &[202],
            1 | 2 => &[503],
            _ => &[429, 503],
        };
        assert!(expected.contains(&status), "delivery {n}: {status}");
        assert!(!closing, "delivery {n}: the server announced it closes");
    }
    assert_eq!(app.count(inbox_event::Entity).await, 1);

    // A refused sender whose body never comes is answered all the same.
    let mut slow = TcpStream::connect(&address).await.unwrap();
    slow.write_all(
        b"POST /webhooks/webform HTTP/1.1\r\nHost: leadpipe\r\nContent-Length: 100\r\n\r\n{\"type\"",
    )
    .await
    .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_answer(&mut slow))
        .await
        .expect("a refusal waited for a body that never came");
    // 429 while the burst is spent; 503 (the backlog) once a token is back;
    // the body was left unread, so the connection ends.
    assert!(matches!(answer, Some((429 | 503, true))), "{answer:?}");
}

async fn a_stored_event_wakes_the_workers_without_polling(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    // No poll or retry would find the work in time.
    app.start_workers(woken_only_settings());
    // The workers' first pass (at start) has found nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let body = lead_event("form-1", "ada@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(app.post_standard("webform", &key, "msg_wake", &body).await).await;
    eventually(
        "the event was processed",
        Duration::from_secs(5),
        async || app.inbox_event(id).await.state == "processed",
    )
    .await;

    if backend == Backend::Postgres {
        // Stored by another process (no in-process signal), announced by
        // NOTIFY: the listener wakes the workers.
        let source = domain::inbound::source::find(
            &app.db,
            "webform",
            &domain::sealed::Keyring::for_tests(),
        )
        .await
        .unwrap()
        .unwrap();
        let body = lead_event("form-2", "ada@example.com", "2026-11-30T10:00:00Z");
        let headers = standard_headers(&key, "msg_elsewhere", now(), &body);
        let other = app.another_process().await;
        let received = receive(
            &other,
            other.hasher(),
            &source,
            &Delivery {
                headers: &headers,
                body: &body,
                correlation_id: None,
                target: None,
            },
            Utc::now(),
        )
        .await
        .unwrap();
        workers::wake::announce_once(&other, domain::store::Work::Inbox).await;
        eventually(
            "the notified event was processed",
            Duration::from_secs(5),
            async || app.inbox_event(received.id).await.state == "processed",
        )
        .await;
    }
    app.stop_workers().await;
}

/// A stopping worker finishes the pass it started and starts none: its
/// events end processed, none is left claimed with a lease for another
/// worker to wait out. The pass is held mid-way by another writer: on
/// PostgreSQL a lock on the lead the event updates (the pass has claimed
/// its event and waits in the upsert), on SQLite the process's write turn
/// (the pass waits to claim).
async fn a_stopping_worker_finishes_the_pass_it_started(backend: Backend) {
    let mut app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let intake = app.token(Role::Intake, Some("webform")).await;
    let created = app
        .api(&intake).create_lead(
            &serde_json::json!({"source": "webform", "source_ref": "form-stop", "email": "old@example.com"}),
        )
        .await;
    assert_eq!(created.status(), 201);
    // Stored while no worker runs; the worker's first pass takes it.
    let body = lead_event("form-stop", "new@example.com", "2026-11-30T10:00:00Z");
    let id = ack_id(app.post_standard("webform", &key, "msg_stop", &body).await).await;

    let turn = app.db.write_turn().await;
    let blocker = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => {
            let txn = app.db.begin_write().await.unwrap();
            txn.execute_unprepared("SELECT id FROM lead WHERE source_ref = 'form-stop' FOR UPDATE")
                .await
                .unwrap();
            Some(txn)
        }
    };
    app.start_workers(woken_only_settings());
    if backend == Backend::Postgres {
        eventually(
            "the pass claimed the event",
            Duration::from_secs(10),
            async || app.inbox_event(id).await.state == "processing",
        )
        .await;
    } else {
        // The pass started at once and waits for the turn.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let workers = app.take_workers().unwrap();
    let stopping = tokio::spawn(workers.stop());
    // Time for a stop that does not wait for the held pass to end: it must not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !stopping.is_finished(),
        "the workers stopped while their pass was held"
    );
    drop(turn);
    if let Some(txn) = blocker {
        txn.rollback().await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the workers never stopped")
        .unwrap();
    let event = app.inbox_event(id).await;
    assert_eq!(event.state, "processed");
    let stored = lead::Entity::find()
        .filter(lead::Column::SourceRef.eq("form-stop"))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.email.as_deref(), Some("new@example.com"));
}
