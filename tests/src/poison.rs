//! Database triggers that make chosen writes fail, so a test can watch one
//! record fail while its neighbours in the same batch go through.

use crate::{Backend, TestApp};

/// Every insert of the lead with this `source_ref` fails in the database.
pub async fn poison_lead_inserts(app: &TestApp, source_ref: &str) {
    let statements = match app.backend {
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER poison BEFORE INSERT ON lead WHEN NEW.source_ref = '{source_ref}' \
             BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"
        )],
        Backend::Postgres => vec![
            format!(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.source_ref = '{source_ref}' THEN \
                 RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW; END $$"
            ),
            "CREATE TRIGGER poison BEFORE INSERT ON lead FOR EACH ROW EXECUTE FUNCTION poison()"
                .to_owned(),
        ],
    };
    for sql in statements {
        app.exec(&sql).await;
    }
}

/// Marking a lead processed fails in the database when its `source_ref` is
/// `LIKE source_ref_like` (one ref, or a pattern such as `bad-%`), until
/// [`cure_lead_processing`].
pub async fn poison_lead_processing(app: &TestApp, source_ref_like: &str) {
    let statements = match app.backend {
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER poison BEFORE UPDATE OF processed_version ON lead \
             WHEN NEW.source_ref LIKE '{source_ref_like}' AND NEW.processed_version <> OLD.processed_version \
             BEGIN SELECT RAISE(ABORT, 'poisoned lead'); END"
        )],
        Backend::Postgres => vec![
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN RAISE EXCEPTION 'poisoned lead'; END $$"
                .to_owned(),
            format!(
                "CREATE TRIGGER poison BEFORE UPDATE ON lead FOR EACH ROW \
                 WHEN (NEW.source_ref LIKE '{source_ref_like}' AND NEW.processed_version <> OLD.processed_version) \
                 EXECUTE FUNCTION poison()"
            ),
        ],
    };
    for sql in statements {
        app.exec(&sql).await;
    }
}

/// Drops [`poison_lead_processing`]'s trigger.
pub async fn cure_lead_processing(app: &TestApp) {
    match app.backend {
        Backend::Sqlite => app.exec("DROP TRIGGER poison").await,
        Backend::Postgres => app.exec("DROP TRIGGER poison ON lead").await,
    }
}
