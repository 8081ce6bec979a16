//! The last-known-good file: every cell's live snapshot as JSON, for a cold start while the
//! apiserver is unreachable. Loaded snapshots are marked [`Freshness::Stale`] with the time they
//! were saved, and replaced by live ones once the informers synced.
//!
//! Written atomically (a new 0600 file under a unique temporary name, then renamed), at most every
//! [`persist_interval`](super::DiscoveryOptions::persist_interval) and only when a snapshot changed.
//!
//! Invariants: no file I/O here runs on the runtime's workers. The file is read on a thread of its
//! own, started when the discovery is built and joined by the first cell that needs a stale
//! snapshot ([`StaleSnapshots`]); the periodic saver writes through tokio's blocking pool
//! ([`spawn_saver`]). Only [`save`] writes on its caller's thread: it serves the blocking
//! `ServiceDiscovery::persist_now`. This file knows snapshots and paths, not the cache: the cache
//! hands it what to write.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{Freshness, ServiceState, Snapshot};

/// Snapshots by `(namespace, service, port)`.
pub(crate) type SnapshotsByPort = HashMap<(String, String, String), Snapshot>;

#[derive(Serialize, Deserialize)]
struct File {
    saved_at: SystemTime,
    snapshots: Vec<Snapshot>,
}

/// The file's content for `snapshots`: the live ones that synced, stamped now.
fn encode(snapshots: &[Arc<Snapshot>]) -> std::io::Result<Vec<u8>> {
    let file = File {
        saved_at: SystemTime::now(),
        snapshots: snapshots
            .iter()
            .filter(|s| s.freshness == Freshness::Live && s.state != ServiceState::NotSynced)
            .map(|s| Snapshot::clone(s))
            .collect(),
    };
    serde_json::to_vec(&file).map_err(std::io::Error::other)
}

/// Writes `snapshots` to `path` now, on this thread.
pub(crate) fn save(path: &Path, snapshots: &[Arc<Snapshot>]) -> std::io::Result<()> {
    // 0600, a unique temporary name, then rename: no reader sees a partial file, no other user
    // reads the cluster's endpoints, and two savers (two processes) never share a temporary file.
    crate::private_file::write(path, &encode(snapshots)?)
}

/// Reads the file; a missing or unreadable file gives nothing (with a warning if unreadable).
pub(crate) fn load(path: &Path) -> SnapshotsByPort {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(_) => return HashMap::new(),
    };
    let file: File = match serde_json::from_slice(&bytes) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable last-known-good file");
            return HashMap::new();
        }
    };
    file.snapshots
        .into_iter()
        .map(|mut s| {
            s.freshness = Freshness::Stale {
                saved_at: file.saved_at,
            };
            (
                (s.namespace.clone(), s.service.clone(), s.port_name.clone()),
                s,
            )
        })
        .collect()
}

/// The snapshots of the last-known-good file, each handed out once (to the cell it is for).
///
/// The file is read on a thread of its own, started by [`StaleSnapshots::load`], so building a
/// discovery does not wait for the disk; the first [`take`](Self::take) joins that thread (a
/// caller that asks for a cell at once still gets its stale snapshot, as before).
pub(crate) struct StaleSnapshots {
    state: Mutex<Stale>,
}

struct Stale {
    /// The thread reading the file, until someone joined it.
    reading: Option<JoinHandle<SnapshotsByPort>>,
    /// What it read, less what was taken.
    read: SnapshotsByPort,
}

impl StaleSnapshots {
    /// Starts reading `path` (nothing to read without one).
    pub(crate) fn load(path: Option<&Path>) -> StaleSnapshots {
        let mut state = Stale {
            reading: None,
            read: HashMap::new(),
        };
        if let Some(path) = path {
            let owned = path.to_owned();
            match std::thread::Builder::new()
                .name("discovery-last-known-good".into())
                .spawn(move || load(&owned))
            {
                Ok(reading) => state.reading = Some(reading),
                // No thread to be had: read here, as a last resort.
                Err(_) => state.read = load(path),
            }
        }
        StaleSnapshots {
            state: Mutex::new(state),
        }
    }

    /// Takes the stale snapshot of `key`, if the file had one (waits for the file to be read).
    pub(crate) fn take(&self, key: &(String, String, String)) -> Option<Snapshot> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reading) = state.reading.take() {
            // A reader that panicked read nothing.
            state.read = reading.join().unwrap_or_default();
        }
        state.read.remove(key)
    }
}

/// What the periodic saver finds when it asks its cache.
pub(crate) enum Due {
    /// The cache is gone: the saver stops.
    Gone,
    /// Nothing changed since the last save.
    Unchanged,
    /// These snapshots are to be written.
    Save(Vec<Arc<Snapshot>>),
}

/// Every `period`, asks `poll` what to do and writes the file when something changed, until
/// `poll` says the cache is gone. The write runs on tokio's blocking pool. A write that fails
/// calls `failed`, which marks the cache changed again, so the next period tries again (a full
/// disk or a missing folder is often fixed meanwhile) instead of waiting for the next change.
pub(crate) fn spawn_saver(
    runtime: &tokio::runtime::Handle,
    path: PathBuf,
    period: Duration,
    poll: impl Fn() -> Due + Send + 'static,
    failed: impl Fn() + Send + 'static,
) {
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let snapshots = match poll() {
                Due::Gone => return,
                Due::Unchanged => continue,
                Due::Save(snapshots) => snapshots,
            };
            let path = path.clone();
            let saved = crate::blocking::unblock(move || save(&path, &snapshots)).await;
            if let Err(e) = saved {
                tracing::warn!(error = %e, "could not write the last-known-good file; retrying");
                failed();
            }
        }
    });
}
