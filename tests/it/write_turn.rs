//! On SQLite every writer takes the store's write turn, with no call site
//! to remember it: a keyed API write (which once skipped it and met
//! SQLite's busy handler instead) and a single statement on the pool (a
//! source saved over HTTP) both wait while another writer holds the turn,
//! then complete. PostgreSQL has no turn: nothing to test there.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use leadpipe_tests::{Backend, TestApp};
use serde_json::json;

/// How long a writer that skipped the turn would need to write.
const SKIPPER_TIME: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_api_write_waits_for_the_write_turn_on_sqlite() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let sales = app.token(domain::auth::Role::Sales, None).await;
    app.post_leads(["turn-1".to_owned()]).await;
    let lead = app.lead_by_ref("turn-1").await.id;
    let path = app.url(&format!("/api/leads/{lead}/notes"));

    let turn = app.db.write_turn().await;
    let note = {
        let (client, sales, path) = (app.client.clone(), sales.clone(), path.clone());
        tokio::spawn(async move {
            client
                .post(&path)
                .bearer_auth(&sales)
                .header("idempotency-key", "turn-note")
                .json(&json!({"text": "Called back."}))
                .send()
                .await
                .unwrap()
        })
    };
    // The sleep is the test: time for a writer that skipped the turn.
    tokio::time::sleep(SKIPPER_TIME).await;
    let written_meanwhile = app
        .scalar("SELECT COUNT(*) FROM activity WHERE kind = 'note'")
        .await;
    drop(turn);
    let answered = note.await.unwrap();
    assert_eq!(
        written_meanwhile, 0,
        "the note was written in another's turn"
    );
    assert_eq!(answered.status(), 201);
    assert_eq!(
        app.scalar("SELECT COUNT(*) FROM activity WHERE kind = 'note'")
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_statement_on_the_pool_waits_for_the_write_turn_on_sqlite() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let admin = app.admin_token().await;

    let turn = app.db.write_turn().await;
    let saved = {
        let (client, admin, url) = (app.client.clone(), admin.clone(), app.url("/api/sources"));
        tokio::spawn(async move {
            client
                .post(&url)
                .bearer_auth(&admin)
                .json(&json!({"name": "turns", "scheme": "hmac-sha256",
                              "secrets": ["turns-signing-secret-0123456789"]}))
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(SKIPPER_TIME).await;
    let written_meanwhile = app
        .scalar("SELECT COUNT(*) FROM source WHERE name = 'turns'")
        .await;
    drop(turn);
    let answered = saved.await.unwrap();
    assert_eq!(
        written_meanwhile, 0,
        "the source was saved in another's turn"
    );
    assert_eq!(answered.status(), 201, "{}", answered.text().await.unwrap());
    assert_eq!(
        app.scalar("SELECT COUNT(*) FROM source WHERE name = 'turns'")
            .await,
        1
    );
}
