//! A fence token whose holding a test switches off: what a `LeaderElector`'s token does when
//! its leadership lapses before the elector has closed the fence.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A token of leadership `term` that holds until [`lapse`](Self::lapse). Equal to any token of
/// the same term, as `FencingToken`s of one leadership are, whether they hold or not.
#[derive(Clone)]
pub struct Lapsing {
    pub term: u64,
    live: Arc<AtomicBool>,
}

impl Lapsing {
    pub fn new(term: u64) -> Lapsing {
        Lapsing {
            term,
            live: Arc::new(AtomicBool::new(true)),
        }
    }

    /// It (and every clone) no longer holds.
    pub fn lapse(&self) {
        self.live.store(false, Ordering::SeqCst);
    }
}

impl PartialEq for Lapsing {
    fn eq(&self, other: &Self) -> bool {
        self.term == other.term
    }
}

impl informer::workqueue::FenceToken for Lapsing {
    fn holds(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }
}
