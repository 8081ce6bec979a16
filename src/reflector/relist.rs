//! Relists asked for from outside the reflector: by [`Informer::relist`](crate::Informer::relist),
//! and by a fenced controller whose fence opens, which must not reconcile on a cache older than
//! the opening (a partition may have hidden changes from its watches).
//!
//! A request is a generation number. The reflector notes the generation current when it starts
//! a list, and when that list completes records it with the list's start and resourceVersion: a
//! request is served by the first list that *started* after it. A watching reflector is woken by
//! a request (through its fifo) and relists at once (no failure, no backoff); one that is opening
//! a watch or backing off relists instead of watching.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Shared by a reflector and whoever asks it to relist. Whoever asks also wakes a watching
/// reflector, through its fifo ([`DeltaFifo::interrupt_producer`](crate::fifo::DeltaFifo)), so
/// that a watch waits on one notification per event, not two.
#[derive(Default)]
pub(crate) struct RelistRequests {
    /// The latest request's generation (0: none yet).
    requested: AtomicU64,
    /// The latest completed list.
    completed: Mutex<Option<CompletedList>>,
}

/// A list the reflector completed.
#[derive(Clone, Debug)]
pub(crate) struct CompletedList {
    /// The latest request generation when the list started: it serves that request and older.
    pub(crate) serves: u64,
    /// When it started.
    pub(crate) started: Instant,
    /// Its resourceVersion.
    pub(crate) resource_version: String,
}

impl RelistRequests {
    /// Asks for a list that starts after this call; returns the request's generation.
    pub(crate) fn request(&self) -> u64 {
        // SeqCst: the caller wakes the reflector after this store, and the reflector loads the
        // generation after it is woken (`Reflector::relist_pending`).
        self.requested.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The latest request's generation.
    pub(crate) fn latest(&self) -> u64 {
        self.requested.load(Ordering::SeqCst)
    }

    /// Records a completed list.
    pub(crate) fn completed(&self, list: CompletedList) {
        *self.completed.lock().unwrap_or_else(|e| e.into_inner()) = Some(list);
    }

    /// The latest completed list.
    pub(crate) fn last_completed(&self) -> Option<CompletedList> {
        self.completed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
