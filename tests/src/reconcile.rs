//! A pull source with one record its mapping rejects until the mapping is
//! fixed: for the tests of rejected reconcile records and their retry.

use api::cli::demo::fake_source::FakeSource;
use serde_json::json;

use crate::TestApp;

/// Starts a fake sender of `records` records whose record 1 carries a
/// broken email where the mapping looks and a good one under
/// `contact_email`, and saves it as source `crm` mapping `/email`: a
/// reconcile run rejects record 1 until [`map_crm_email_from`] points the
/// mapping at `/contact_email`.
pub async fn crm_with_one_broken_email(app: &TestApp, admin: &str, records: usize) -> FakeSource {
    let fake = FakeSource::start(records).await.unwrap();
    fake.update(1, |record| {
        record["email"] = json!("not-an-email");
        record["contact_email"] = json!("fixed@example.com");
    });
    app.standard_source("crm").await;
    map_crm_email_from(app, admin, &fake, "/email").await;
    fake
}

/// Changes source `crm` to pull from `fake` with its email read at `pointer`.
pub async fn map_crm_email_from(app: &TestApp, admin: &str, fake: &FakeSource, pointer: &str) {
    let saved = app
        .api(admin)
        .patch_source(
            "crm",
            &json!({"pull_url": fake.pull_url, "email_pointer": pointer}),
        )
        .await;
    assert_eq!(saved.status(), 200);
}
