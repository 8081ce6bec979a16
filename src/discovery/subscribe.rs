//! Push delivery: a subscription reads the same latest-value cell as
//! [`ServiceDiscovery::instances`](super::ServiceDiscovery::instances), so it never queues a backlog and a pull
//! after a notification never returns an older revision.

use std::sync::Arc;

use tokio::sync::watch;

use super::snapshot::{InstanceDiff, Snapshot, diff};

/// One notification: the new snapshot and what changed since the snapshot this subscription
/// delivered before (not since the previous revision: a slow subscriber skips intermediate
/// revisions, and its diff spans them).
///
/// ```
/// use std::sync::Arc;
/// use informer::discovery::{Change, Snapshot};
/// let c = Change { snapshot: Arc::new(Snapshot::not_synced("ns", "svc", "")), previous_revision: None, diff: Default::default() };
/// assert!(c.diff.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Change {
    /// The new snapshot.
    pub snapshot: Arc<Snapshot>,
    /// The revision this subscription delivered before (`None` on the first notification).
    pub previous_revision: Option<u64>,
    /// Instances added, removed and updated since that delivery.
    pub diff: InstanceDiff,
}

/// The receiving end of [`ServiceDiscovery::subscribe`](super::ServiceDiscovery::subscribe).
///
/// The first [`changed`](Self::changed) returns the current snapshot at once (everything
/// "added"); later calls wait for a snapshot whose content differs. Only the newest snapshot is
/// kept for a subscriber that falls behind.
///
/// ```no_run
/// # async fn demo(d: informer::discovery::ServiceDiscovery) {
/// let mut sub = d.subscribe("prod", "web", "http");
/// while let Some(change) = sub.changed().await {
///     println!("rev {}: +{} -{}", change.snapshot.revision, change.diff.added.len(), change.diff.removed.len());
/// }
/// # }
/// ```
pub struct Subscription {
    rx: watch::Receiver<Arc<Snapshot>>,
    last: Option<Arc<Snapshot>>,
}

impl Subscription {
    pub(crate) fn new(rx: watch::Receiver<Arc<Snapshot>>) -> Subscription {
        Subscription { rx, last: None }
    }

    /// Waits for the next snapshot whose content differs from the last one delivered (the first
    /// call returns the current one). `None` once discovery is dropped.
    pub async fn changed(&mut self) -> Option<Change> {
        loop {
            if let Some(last) = &self.last {
                self.rx.changed().await.ok()?;
                let current = self.rx.borrow_and_update().clone();
                // Publishers only send new content, but a subscriber that skipped revisions can
                // land on content equal to what it saw (A -> B -> A): not a change for it.
                if current.revision == last.revision || current.same_content(last) {
                    continue;
                }
                let change = Change {
                    diff: diff(last, &current),
                    previous_revision: Some(last.revision),
                    snapshot: current.clone(),
                };
                self.last = Some(current);
                return Some(change);
            }
            let current = self.rx.borrow_and_update().clone();
            let empty =
                Snapshot::not_synced(&current.namespace, &current.service, &current.port_name);
            let change = Change {
                diff: diff(&empty, &current),
                previous_revision: None,
                snapshot: current.clone(),
            };
            self.last = Some(current);
            return Some(change);
        }
    }

    /// The newest snapshot, without waiting and without marking it delivered.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let sub = d.subscribe("prod", "web", "http");
    /// println!("{:?}", sub.current().state);
    /// # }
    /// ```
    pub fn current(&self) -> Arc<Snapshot> {
        self.rx.borrow().clone()
    }

    /// The snapshot the last [`changed`](Self::changed) returned.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// assert!(d.subscribe("prod", "web", "http").last_delivered().is_none());
    /// # }
    /// ```
    pub fn last_delivered(&self) -> Option<&Arc<Snapshot>> {
        self.last.as_ref()
    }
}
