//! The last-known-good file: every cell's live snapshot as JSON, for a cold start while the
//! apiserver is unreachable. Loaded snapshots are marked [`Freshness::Stale`] with the time they
//! were saved, and replaced by live ones once the informers synced.
//!
//! Written atomically (a new 0600 file under a unique temporary name, then renamed), at most every
//! [`persist_interval`](super::DiscoveryOptions::persist_interval) and only when a snapshot changed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::cache::Cache;
use super::{Freshness, ServiceState, Snapshot};

#[derive(Serialize, Deserialize)]
struct File {
    saved_at: SystemTime,
    snapshots: Vec<Snapshot>,
}

/// Writes the file now (no-op without a configured path).
pub(crate) fn save(cache: &Cache) -> std::io::Result<()> {
    let Some(path) = cache.options.last_known_good.as_deref() else {
        return Ok(());
    };
    // Relaxed: a hint (see `Cache::dirty`); cleared before reading, so a change made while
    // saving sets it again and is saved next time.
    cache.dirty.store(false, Ordering::Relaxed);
    let snapshots: Vec<Snapshot> = cache
        .all_snapshots()
        .into_iter()
        .filter(|s| s.freshness == Freshness::Live && s.state != ServiceState::NotSynced)
        .map(|s| Snapshot::clone(&s))
        .collect();
    let file = File {
        saved_at: SystemTime::now(),
        snapshots,
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    // 0600, a unique temporary name, then rename: no reader sees a partial file, no other user
    // reads the cluster's endpoints, and two savers (two processes) never share a temporary file.
    crate::private_file::write(path, &bytes)
}

/// Reads the file; a missing or unreadable file gives nothing (with a warning if unreadable).
pub(crate) fn load(path: &Path) -> HashMap<(String, String, String), Snapshot> {
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

/// Saves every `persist_interval` when something changed, until the cache is dropped.
pub(crate) fn spawn_saver(cache: &Arc<Cache>) {
    let weak: Weak<Cache> = Arc::downgrade(cache);
    let period = cache.options.persist_interval;
    cache.runtime().spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(cache) = weak.upgrade() else { return };
            // Relaxed: a hint (see `save`).
            if cache.dirty.load(Ordering::Relaxed) {
                if let Err(e) = save(&cache) {
                    tracing::warn!(error = %e, "could not write the last-known-good file");
                }
            }
        }
    });
}
