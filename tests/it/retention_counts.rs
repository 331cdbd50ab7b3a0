//! A retention sweep that fails half-way still counts what it removed:
//! those rows are gone, and no later sweep finds them to count.

#![allow(clippy::unwrap_used)]

use chrono::Utc;
use domain::entities::inbox_event;
use domain::retention::RetentionRules;
use leadpipe_tests::prometheus::series_value;
use leadpipe_tests::webhooks::{ack_id, lead_event};
use leadpipe_tests::{Backend, TestApp, on_both_backends};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

on_both_backends!(a_sweep_that_fails_half_way_counts_what_it_emptied);

const BODIES: &str = "leadpipe_retention_removed_total{kind=\"inbox_body\"}";

/// Every delete of an inbox row fails in the database.
async fn poison_inbox_deletes(app: &TestApp) {
    let statements = match app.backend {
        Backend::Sqlite => vec![
            "CREATE TRIGGER poison BEFORE DELETE ON inbox_event \
             BEGIN SELECT RAISE(ABORT, 'poisoned delete'); END",
        ],
        Backend::Postgres => vec![
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN RAISE EXCEPTION 'poisoned delete'; END $$",
            "CREATE TRIGGER poison BEFORE DELETE ON inbox_event \
             FOR EACH ROW EXECUTE FUNCTION poison()",
        ],
    };
    for sql in statements {
        app.exec(sql).await;
    }
}

async fn a_sweep_that_fails_half_way_counts_what_it_emptied(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.standard_source("webform").await;
    let mut ids = Vec::new();
    for name in ["old", "ancient"] {
        let body = lead_event(name, &format!("{name}@example.com"), "2026-11-30T10:00:00Z");
        ids.push(
            ack_id(
                app.post_standard("webform", &key, &format!("msg-{name}"), &body)
                    .await,
            )
            .await,
        );
    }
    // Finished and aged: both bodies past their window, "ancient" past the
    // row's own, so the sweep empties two bodies and then deletes a row.
    for (id, days) in [(ids[0], 40), (ids[1], 100)] {
        let then = Utc::now() - chrono::Duration::days(days);
        inbox_event::Entity::update_many()
            .col_expr(inbox_event::Column::State, Expr::value("processed"))
            .col_expr(inbox_event::Column::ReceivedAt, Expr::value(then))
            .col_expr(inbox_event::Column::LastDeliveryAt, Expr::value(then))
            .filter(inbox_event::Column::Id.eq(id))
            .exec(&app.db)
            .await
            .unwrap();
    }
    poison_inbox_deletes(&app).await;
    let before = series_value(&app.metrics().await, BODIES).unwrap_or(0.0);

    let swept = workers::housekeeping::sweep_retention(&app.db, &RetentionRules::default()).await;
    assert!(swept.is_err(), "the poisoned delete fails the sweep");

    for id in &ids {
        assert!(
            app.inbox_event(*id).await.body.is_empty(),
            "body {id} emptied"
        );
    }
    let after = series_value(&app.metrics().await, BODIES).unwrap_or(0.0);
    assert!(
        after >= before + 2.0,
        "the two emptied bodies are counted: {before} -> {after}"
    );
}
