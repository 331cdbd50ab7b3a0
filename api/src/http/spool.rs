//! Spool files for uploads (imports): created 0600 with unpredictable names
//! (`tempfile`) in a directory of their own, only the owner may enter. Each
//! spool holds an exclusive lock while in use, so a process starting up can
//! tell the leftovers of a crashed run (unlocked) from the spools of a live
//! one (locked) and remove only the former.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// Every spool file's name starts with this.
pub const PREFIX: &str = "leadpipe-upload-";

/// `LEADPIPE_SPOOL_DIR`, or `leadpipe-spool` in the system's temp directory.
pub fn dir(configured: Option<&Path>) -> PathBuf {
    configured.map_or_else(
        || std::env::temp_dir().join("leadpipe-spool"),
        Path::to_owned,
    )
}

/// Creates the directory (0700) if needed, and refuses one that others may
/// write to: there they could rename or replace a spool under us (a shared
/// temp directory lets anyone create the name first).
fn ensure_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mode = fs::metadata(dir)?.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "spool directory {} is writable by other users (mode {:o}); make it 0700 or set LEADPIPE_SPOOL_DIR",
                    dir.display(),
                    mode & 0o777
                ),
            ));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        fs::create_dir_all(dir)
    }
}

/// How many fresh files [`Spool::create`] tries before giving up.
const CREATE_ATTEMPTS: usize = 8;

/// Whether the spool's path still names the file it has open (a concurrent
/// [`remove_stale`] did not unlink it before the lock was taken).
fn still_in_place(file: &NamedTempFile) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (fs::metadata(file.path()), file.as_file().metadata()) {
            (Ok(named), Ok(open)) => named.dev() == open.dev() && named.ino() == open.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        file.path().exists()
    }
}

/// A spool file, locked while it lives and removed when dropped.
pub struct Spool {
    file: NamedTempFile,
}

impl Spool {
    pub fn create(dir: &Path) -> io::Result<Self> {
        ensure_dir(dir)?;
        // Between its creation and its lock a new spool looks stale to a
        // process starting up ([`remove_stale`]): that sweep may hold it
        // locked for a moment or remove it. Either way this attempt gives it
        // up and makes another; once locked and still in place, it is ours.
        for _ in 0..CREATE_ATTEMPTS {
            let file = tempfile::Builder::new().prefix(PREFIX).tempfile_in(dir)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                // A directory someone else owns could swap the file under us.
                if fs::metadata(dir)?.uid() != file.as_file().metadata()?.uid() {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("spool directory {} belongs to another user", dir.display()),
                    ));
                }
            }
            if file.as_file().try_lock().is_ok() && still_in_place(&file) {
                return Ok(Self { file });
            }
        }
        Err(io::Error::other(format!(
            "could not create a spool in {}: each new file was taken by a concurrent clean-up",
            dir.display()
        )))
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// A second handle for writing; the lock stays with `self`.
    pub fn writer(&self) -> io::Result<File> {
        self.file.reopen()
    }
}

/// Removes the spools of crashed runs: files with our prefix that no live
/// process holds locked. Returns how many went.
pub fn remove_stale(dir: &Path) -> io::Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let is_spool = entry.file_name().to_string_lossy().starts_with(PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_file());
        if !is_spool {
            continue;
        }
        let Ok(file) = File::open(entry.path()) else {
            continue;
        };
        if file.try_lock().is_ok() && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spools_are_private_locked_and_stale_ones_are_removed() {
        let dir = std::env::temp_dir().join(format!("lp-spool-test-{}", uuid::Uuid::new_v4()));
        let live = Spool::create(&dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(live.path()), 0o600);
        }
        // A crashed run's spool: same prefix, nobody holds it.
        let stale = dir.join(format!("{PREFIX}crashed"));
        fs::write(&stale, b"source_ref\n1\n").unwrap();
        let unrelated = dir.join("keep-me");
        fs::write(&unrelated, b"x").unwrap();

        assert_eq!(remove_stale(&dir).unwrap(), 1);
        assert!(!stale.exists());
        assert!(live.path().exists(), "a live spool stays");
        assert!(unrelated.exists());
        let path = live.path().to_owned();
        drop(live);
        assert!(!path.exists(), "a dropped spool is removed");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Another process starting up sweeps the directory while this one
    /// creates spools: no spool may vanish between its creation and its use.
    #[test]
    fn a_sweep_racing_spool_creation_removes_no_live_spool() {
        let dir = std::env::temp_dir().join(format!("lp-spool-race-{}", uuid::Uuid::new_v4()));
        ensure_dir(&dir).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = {
            let (dir, done) = (dir.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = remove_stale(&dir);
                }
            })
        };
        let mut lost = 0;
        for _ in 0..2000 {
            match Spool::create(&dir) {
                Ok(spool) => {
                    if spool.writer().is_err() || !spool.path().exists() {
                        lost += 1;
                    }
                }
                Err(_) => lost += 1,
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        sweeper.join().unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(lost, 0, "spools lost to a concurrent sweep");
    }
}
