//! Wake-ups from the write itself (PostgreSQL): triggers on the tables that
//! hold background work send a notification in the writing transaction, so
//! every worker process hears of the work exactly when it commits, whichever
//! process or statement wrote it. The channels are `workers::wake`'s.
//! Notifications of one channel within a transaction are delivered once.
//! SQLite has one process, whose connections signal their own commits.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DatabaseBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &str = "
CREATE FUNCTION leadpipe_notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END $$;

-- An event stored, or sent back by ops, waits to be claimed.
CREATE TRIGGER inbox_event_received_notify
    AFTER INSERT OR UPDATE OF state ON inbox_event
    FOR EACH ROW WHEN (NEW.state = 'received')
    EXECUTE FUNCTION leadpipe_notify_work('leadpipe_inbox');

-- A lead version left to process (intake, imports, reconcile, sales edits,
-- inbox batches); the processing that catches it up sends nothing.
CREATE TRIGGER lead_unprocessed_notify
    AFTER INSERT OR UPDATE ON lead
    FOR EACH ROW WHEN (NEW.processed_version < NEW.version)
    EXECUTE FUNCTION leadpipe_notify_work('leadpipe_leads');

-- Events to deliver: only the write path inserts them.
CREATE TRIGGER outbox_event_notify
    AFTER INSERT ON outbox_event
    FOR EACH STATEMENT
    EXECUTE FUNCTION leadpipe_notify_work('leadpipe_outbox');
";

const DOWN: &str = "
DROP TRIGGER IF EXISTS outbox_event_notify ON outbox_event;
DROP TRIGGER IF EXISTS lead_unprocessed_notify ON lead;
DROP TRIGGER IF EXISTS inbox_event_received_notify ON inbox_event;
DROP FUNCTION IF EXISTS leadpipe_notify_work();
";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared(UP).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared(DOWN).await?;
        }
        Ok(())
    }
}
