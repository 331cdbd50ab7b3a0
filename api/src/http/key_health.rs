//! Whether the configured keys open every stored secret, for `/readyz`:
//! tried again at most every few seconds, since another process may store a
//! secret under a key this one lacks (a rotation rolled out halfway).

use domain::store::Store;
use std::time::{Duration, Instant};

use domain::sealed::Keyring;
use domain::sealed::key_check::{self, KeyMismatch};
use tokio::sync::Mutex;

const RECHECK: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct KeyHealth {
    last: Mutex<Option<(Instant, Option<KeyMismatch>)>>,
}

impl KeyHealth {
    /// The first stored secret the keys do not open, as of at most
    /// [`RECHECK`] ago; `Err` when the database did not answer.
    pub async fn mismatch(
        &self,
        db: &Store,
        keys: &Keyring,
    ) -> Result<Option<KeyMismatch>, domain::Error> {
        let mut last = self.last.lock().await;
        if let Some((at, mismatch)) = last.as_ref()
            && at.elapsed() < RECHECK
        {
            return Ok(mismatch.clone());
        }
        let mismatch = key_check::first_unopenable(db, keys).await?;
        if let Some(mismatch) = &mismatch {
            tracing::error!(%mismatch, "not ready: a stored secret does not open");
        }
        *last = Some((Instant::now(), mismatch.clone()));
        Ok(mismatch)
    }
}
