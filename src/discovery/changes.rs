//! A change stream per Service port for RPC clients: the endpoints a client should send new calls
//! to, as inserts, updates and removals, keyed by the endpoint's socket address.
//!
//! # What
//! [`EndpointSet`] is the core, free of I/O and of any RPC framework: it remembers the usable
//! endpoints it handed out and turns each new [`Snapshot`] into the [`EndpointChange`]s that lead
//! there. [`EndpointStream`] drives one from a [`Subscription`] and is a plain
//! [`Stream`](futures_core::Stream) (or [`EndpointStream::next_change`] in a loop); with the
//! `tower` feature, [`EndpointStream::into_discover`] adapts it to tower's `Discover`.
//!
//! # Invariants
//! - **Only endpoints a client should send new calls to**: a snapshot's
//!   [`usable`](Snapshot::usable) instances, i.e. the ready ones or, when none is ready,
//!   the serving-and-terminating ones (discovery's fallback rule). A Service that is absent
//!   (deleted) has none: every endpoint is removed.
//! - **First the current endpoints, then changes**: the first snapshot yields an insert per usable
//!   endpoint; each later one yields exactly the difference to what was handed out.
//! - **Inserts before removals**: the changes of one snapshot come out as every insert, then every
//!   update, then every removal (each group ordered by key), so a balancer never sees an endpoint
//!   removed before the insert of its replacement from the same snapshot change, and is never
//!   left empty in between when the new snapshot has endpoints.
//! - **Keys are stable and unique**: the key is the endpoint's `(address, port)`
//!   ([`Instance::key`]); it is inserted at most once until removed, and a removal names a key
//!   that was inserted. A field change of a usable endpoint (zone, node, hints, conditions, Pod
//!   metadata) is an [`EndpointChange::Update`], never a remove and insert.
//! - **Latest wins**: the stream reads the subscription's latest snapshot; a slow reader skips
//!   intermediate revisions and gets one batch spanning them.
//! - **Empty before the end**: when the stream ends (discovery dropped, or the Service port
//!   forgotten past [`max_tracked_services`](super::DiscoveryOptions::max_tracked_services),
//!   [`max_ports_per_service`](super::DiscoveryOptions::max_ports_per_service) or
//!   [`max_watched_namespaces`](super::DiscoveryOptions::max_watched_namespaces)), it first
//!   yields a removal for every endpoint still inserted, in key order. A consumer that ignores
//!   the end, as tower's balancers do, is left with no endpoint rather than with the last ones
//!   for ever: nothing follows them any more, and they go stale unseen.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::snapshot::{Instance, ServiceState, Snapshot};
use super::subscribe::{Change, Subscription};

/// One change to the set of endpoints a client should send new calls to.
///
/// ```
/// use informer::discovery::{EndpointChange, Instance};
/// let i = Instance::new("10.0.0.1".parse().unwrap(), 8080);
/// let c = EndpointChange::Insert(i.socket_addr(), i);
/// assert_eq!(c.key().to_string(), "10.0.0.1:8080");
/// assert!(c.is_insert());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum EndpointChange {
    /// A new usable endpoint: connect to it and send calls.
    Insert(SocketAddr, Instance),
    /// A usable endpoint whose fields changed (zone, node, hints, conditions, Pod metadata); same
    /// address.
    Update(SocketAddr, Instance),
    /// The endpoint is no longer usable (gone, not ready, or terminating while others are
    /// ready): send it no new calls. Carries the instance as it was last handed out.
    Remove(SocketAddr, Instance),
}

impl EndpointChange {
    /// The endpoint's key, its socket address.
    ///
    /// ```
    /// use informer::discovery::{EndpointChange, Instance};
    /// let i = Instance::new("10.0.0.2".parse().unwrap(), 80);
    /// assert_eq!(EndpointChange::Remove(i.socket_addr(), i).key().port(), 80);
    /// ```
    pub fn key(&self) -> SocketAddr {
        match self {
            EndpointChange::Insert(k, _)
            | EndpointChange::Update(k, _)
            | EndpointChange::Remove(k, _) => *k,
        }
    }

    /// The instance the change carries (for a removal, as it was last handed out).
    ///
    /// ```
    /// use informer::discovery::{EndpointChange, Instance};
    /// let i = Instance::new("10.0.0.3".parse().unwrap(), 80);
    /// assert!(EndpointChange::Update(i.socket_addr(), i.clone()).instance().ready);
    /// ```
    pub fn instance(&self) -> &Instance {
        match self {
            EndpointChange::Insert(_, i)
            | EndpointChange::Update(_, i)
            | EndpointChange::Remove(_, i) => i,
        }
    }

    /// Whether this is an [`Insert`](EndpointChange::Insert).
    ///
    /// ```
    /// use informer::discovery::{EndpointChange, Instance};
    /// let i = Instance::new("10.0.0.4".parse().unwrap(), 80);
    /// assert!(!EndpointChange::Remove(i.socket_addr(), i).is_insert());
    /// ```
    pub fn is_insert(&self) -> bool {
        matches!(self, EndpointChange::Insert(..))
    }

    /// Whether this is a [`Remove`](EndpointChange::Remove).
    ///
    /// ```
    /// use informer::discovery::{EndpointChange, Instance};
    /// let i = Instance::new("10.0.0.5".parse().unwrap(), 80);
    /// assert!(EndpointChange::Remove(i.socket_addr(), i).is_remove());
    /// ```
    pub fn is_remove(&self) -> bool {
        matches!(self, EndpointChange::Remove(..))
    }
}

/// The usable endpoints handed out so far, and the diff of a new snapshot against them: the core
/// of [`EndpointStream`], usable on its own with any snapshot source (a
/// [`Subscription`], [`ServiceDiscovery::instances`](super::ServiceDiscovery::instances) polled,
/// a test).
///
/// ```
/// use informer::discovery::{EndpointSet, Instance, Snapshot, ServiceState};
/// let mut s = Snapshot::not_synced("ns", "web", "http");
/// s.state = ServiceState::Ready;
/// s.instances.push(Instance::new("10.0.0.1".parse().unwrap(), 8080));
/// let mut set = EndpointSet::new();
/// let changes = set.apply(&s);
/// assert!(changes[0].is_insert());
/// assert!(set.apply(&s).is_empty());
/// assert_eq!(set.len(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct EndpointSet {
    usable: BTreeMap<SocketAddr, Instance>,
}

impl EndpointSet {
    /// An empty set: the first [`apply`](Self::apply) inserts every usable endpoint.
    ///
    /// ```
    /// assert!(informer::discovery::EndpointSet::new().is_empty());
    /// ```
    pub fn new() -> EndpointSet {
        EndpointSet::default()
    }

    /// Makes the set the usable endpoints of `snapshot` and returns the changes that lead there:
    /// inserts, then updates, then removals, each ordered by key.
    ///
    /// ```
    /// use informer::discovery::{EndpointSet, Instance, Snapshot, ServiceState};
    /// let mut s = Snapshot::not_synced("ns", "web", "http");
    /// s.state = ServiceState::Ready;
    /// s.instances.push(Instance::new("10.0.0.1".parse().unwrap(), 8080));
    /// let mut set = EndpointSet::new();
    /// set.apply(&s);
    /// // A rolling replacement in one snapshot: the new endpoint comes out before the old goes.
    /// s.instances = vec![Instance::new("10.0.0.2".parse().unwrap(), 8080)];
    /// let c = set.apply(&s);
    /// assert!(c[0].is_insert() && c[1].is_remove());
    /// ```
    pub fn apply(&mut self, snapshot: &Snapshot) -> Vec<EndpointChange> {
        let mut next = BTreeMap::new();
        // An absent Service has no endpoints, whatever objects still name it.
        if snapshot.state != ServiceState::ServiceAbsent {
            for i in snapshot.usable() {
                next.entry(i.socket_addr()).or_insert_with(|| i.clone());
            }
        }
        let mut inserts = Vec::new();
        let mut updates = Vec::new();
        for (key, new) in &next {
            match self.usable.get(key) {
                None => inserts.push(EndpointChange::Insert(*key, new.clone())),
                Some(old) if old != new => updates.push(EndpointChange::Update(*key, new.clone())),
                Some(_) => {}
            }
        }
        let removes = std::mem::take(&mut self.usable)
            .into_iter()
            .filter(|(key, _)| !next.contains_key(key))
            .map(|(key, old)| EndpointChange::Remove(key, old));
        let mut changes = inserts;
        changes.append(&mut updates);
        changes.extend(removes);
        self.usable = next;
        changes
    }

    /// The usable endpoints handed out, by key.
    ///
    /// ```
    /// assert_eq!(informer::discovery::EndpointSet::new().iter().count(), 0);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&SocketAddr, &Instance)> {
        self.usable.iter()
    }

    /// Empties the set and returns a removal for every endpoint it held, in key order: what a
    /// consumer is told when its source of snapshots ends (see [`EndpointStream`]).
    ///
    /// ```
    /// use informer::discovery::{EndpointSet, Instance, Snapshot, ServiceState};
    /// let mut s = Snapshot::not_synced("ns", "web", "http");
    /// s.state = ServiceState::Ready;
    /// s.instances.push(Instance::new("10.0.0.1".parse().unwrap(), 8080));
    /// let mut set = EndpointSet::new();
    /// set.apply(&s);
    /// let gone = set.remove_all();
    /// assert!(gone.len() == 1 && gone[0].is_remove());
    /// assert!(set.is_empty());
    /// ```
    pub fn remove_all(&mut self) -> Vec<EndpointChange> {
        std::mem::take(&mut self.usable)
            .into_iter()
            .map(|(key, old)| EndpointChange::Remove(key, old))
            .collect()
    }

    /// How many usable endpoints were handed out.
    ///
    /// ```
    /// assert_eq!(informer::discovery::EndpointSet::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.usable.len()
    }

    /// Whether no usable endpoint is handed out.
    ///
    /// ```
    /// assert!(informer::discovery::EndpointSet::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.usable.is_empty()
    }
}

/// The next notification of a subscription, as an owned future (it takes the subscription and
/// gives it back), so that a poll-based stream can hold it between polls.
type NextSnapshot = Pin<Box<dyn Future<Output = (Subscription, Option<Change>)> + Send>>;

enum Source {
    /// Between notifications: the subscription, not polled.
    Idle(Subscription),
    /// Waiting for the subscription's next notification.
    Waiting(NextSnapshot),
    /// Discovery was dropped, or the Service port forgotten: the stream ends once `ready` (the
    /// removals of every endpoint still inserted) is drained.
    Ended,
}

/// The endpoint changes of one Service port, from
/// [`ServiceDiscovery::endpoint_changes`](super::ServiceDiscovery::endpoint_changes): first an
/// insert per current usable endpoint, then the changes as discovery's snapshot changes (see the
/// module's invariants). Ends when discovery is dropped or the port forgotten, after a removal
/// of every endpoint still inserted (so a balancer that ignores the end is left empty, not on
/// stale endpoints). Cancel-safe: dropping a pending [`next_change`](Self::next_change) loses
/// nothing.
///
/// ```no_run
/// # async fn demo(d: informer::discovery::ServiceDiscovery) {
/// use informer::discovery::EndpointChange;
/// let mut changes = d.endpoint_changes("prod", "web", "grpc");
/// while let Some(change) = changes.next_change().await {
///     match change {
///         EndpointChange::Insert(addr, i) => println!("connect {addr} (zone {:?})", i.zone),
///         EndpointChange::Update(addr, _) => println!("{addr} changed"),
///         EndpointChange::Remove(addr, _) => println!("no new calls to {addr}"),
///     }
/// }
/// # }
/// ```
pub struct EndpointStream {
    source: Source,
    set: EndpointSet,
    /// Changes computed but not yet yielded (the rest of one snapshot's batch).
    ready: VecDeque<EndpointChange>,
}

impl fmt::Debug for EndpointStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointStream")
            .field("endpoints", &self.set.len())
            .field("queued", &self.ready.len())
            .field("ended", &matches!(self.source, Source::Ended))
            .finish()
    }
}

impl EndpointStream {
    /// The change stream of a subscription that has delivered nothing yet (as
    /// [`ServiceDiscovery::subscribe`](super::ServiceDiscovery::subscribe) returns it). With one
    /// that already delivered, the stream starts from the next notification, and its first
    /// batch still inserts every usable endpoint of it.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let changes = informer::discovery::EndpointStream::new(d.subscribe("prod", "web", "grpc"));
    /// # let _ = changes;
    /// # }
    /// ```
    pub fn new(subscription: Subscription) -> EndpointStream {
        EndpointStream {
            source: Source::Idle(subscription),
            set: EndpointSet::new(),
            ready: VecDeque::new(),
        }
    }

    /// The usable endpoints handed out so far.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let changes = d.endpoint_changes("prod", "web", "grpc");
    /// assert!(changes.endpoints().is_empty());
    /// # }
    /// ```
    pub fn endpoints(&self) -> &EndpointSet {
        &self.set
    }

    /// The next change; `None` once the stream ended (after the removal of every endpoint
    /// still inserted).
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let mut changes = d.endpoint_changes("prod", "web", "grpc");
    /// if let Some(first) = changes.next_change().await {
    ///     println!("{:?}", first);
    /// }
    /// # }
    /// ```
    pub async fn next_change(&mut self) -> Option<EndpointChange> {
        std::future::poll_fn(|cx| self.poll_change(cx)).await
    }

    /// Polls for the next change (the [`Stream`] implementation).
    pub fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Option<EndpointChange>> {
        loop {
            if let Some(change) = self.ready.pop_front() {
                return Poll::Ready(Some(change));
            }
            match std::mem::replace(&mut self.source, Source::Ended) {
                Source::Ended => return Poll::Ready(None),
                Source::Idle(mut subscription) => {
                    self.source = Source::Waiting(Box::pin(async move {
                        let change = subscription.changed().await;
                        (subscription, change)
                    }));
                }
                Source::Waiting(mut next) => match next.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.source = Source::Waiting(next);
                        return Poll::Pending;
                    }
                    // Ended (the source stays `Ended`): every endpoint still inserted is
                    // removed first, then `None`.
                    Poll::Ready((_, None)) => self.ready.extend(self.set.remove_all()),
                    Poll::Ready((subscription, Some(change))) => {
                        self.source = Source::Idle(subscription);
                        self.ready.extend(self.set.apply(&change.snapshot));
                    }
                },
            }
        }
    }
}

impl Stream for EndpointStream {
    type Item = EndpointChange;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<EndpointChange>> {
        self.get_mut().poll_change(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(ip: &str) -> Instance {
        Instance::new(ip.parse().unwrap(), 8080)
    }

    fn terminating(ip: &str) -> Instance {
        Instance {
            ready: false,
            serving: true,
            terminating: true,
            ..instance(ip)
        }
    }

    fn not_ready(ip: &str) -> Instance {
        Instance {
            ready: false,
            serving: false,
            ..instance(ip)
        }
    }

    fn snapshot(instances: Vec<Instance>) -> Snapshot {
        let mut s = Snapshot::not_synced("ns", "web", "http");
        s.state = ServiceState::Ready;
        s.instances = instances;
        s
    }

    fn keys(changes: &[EndpointChange]) -> Vec<(char, String)> {
        changes
            .iter()
            .map(|c| {
                let kind = match c {
                    EndpointChange::Insert(..) => '+',
                    EndpointChange::Update(..) => '~',
                    EndpointChange::Remove(..) => '-',
                };
                (kind, c.key().ip().to_string())
            })
            .collect()
    }

    fn ks(v: &[(char, &str)]) -> Vec<(char, String)> {
        v.iter().map(|(k, ip)| (*k, ip.to_string())).collect()
    }

    #[test]
    fn first_snapshot_inserts_every_usable_endpoint() {
        let mut set = EndpointSet::new();
        // Not synced yet: nothing.
        assert!(
            set.apply(&Snapshot::not_synced("ns", "web", "http"))
                .is_empty()
        );
        let c = set.apply(&snapshot(vec![instance("10.0.0.1"), instance("10.0.0.2")]));
        assert_eq!(keys(&c), ks(&[('+', "10.0.0.1"), ('+', "10.0.0.2")]));
    }

    #[test]
    fn a_replacement_is_inserted_before_its_predecessor_is_removed() {
        let mut set = EndpointSet::new();
        set.apply(&snapshot(vec![instance("10.0.0.1"), instance("10.0.0.9")]));
        // 10.0.0.9 replaced by 10.0.0.2 (sorting before it) and 10.0.0.1 by 10.0.0.10 (after it):
        // every insert still precedes every removal.
        let c = set.apply(&snapshot(vec![instance("10.0.0.2"), instance("10.0.0.10")]));
        assert_eq!(
            keys(&c),
            ks(&[
                ('+', "10.0.0.2"),
                ('+', "10.0.0.10"),
                ('-', "10.0.0.1"),
                ('-', "10.0.0.9"),
            ])
        );
        // The old one turning terminating while the new one is ready: removed (no new calls),
        // and the new one inserted first.
        let c = set.apply(&snapshot(vec![
            instance("10.0.0.2"),
            instance("10.0.0.3"),
            terminating("10.0.0.10"),
        ]));
        assert_eq!(keys(&c), ks(&[('+', "10.0.0.3"), ('-', "10.0.0.10")]));
    }

    #[test]
    fn with_no_ready_endpoint_serving_terminating_ones_are_used() {
        let mut set = EndpointSet::new();
        set.apply(&snapshot(vec![instance("10.0.0.1"), instance("10.0.0.2")]));
        // Both terminate and nothing replaces them: discovery falls back to the serving ones;
        // the conditions changed, so each is an update, never a remove and insert.
        let mut s = snapshot(vec![terminating("10.0.0.1"), terminating("10.0.0.2")]);
        s.terminating_fallback = true;
        let c = set.apply(&s);
        assert_eq!(keys(&c), ks(&[('~', "10.0.0.1"), ('~', "10.0.0.2")]));
        assert!(c.iter().all(|c| c.instance().terminating));
        // Without the fallback flag (option off) terminating endpoints are not usable.
        let c = set.apply(&snapshot(vec![
            terminating("10.0.0.1"),
            not_ready("10.0.0.2"),
        ]));
        assert_eq!(keys(&c), ks(&[('-', "10.0.0.1"), ('-', "10.0.0.2")]));
        // A ready one comes back: inserted; terminating ones stay out.
        let c = set.apply(&snapshot(vec![
            terminating("10.0.0.1"),
            instance("10.0.0.3"),
        ]));
        assert_eq!(keys(&c), ks(&[('+', "10.0.0.3")]));
    }

    #[test]
    fn a_deleted_service_removes_every_endpoint() {
        let mut set = EndpointSet::new();
        set.apply(&snapshot(vec![instance("10.0.0.1"), instance("10.0.0.2")]));
        let mut gone = snapshot(vec![instance("10.0.0.1")]);
        gone.state = ServiceState::ServiceAbsent;
        let c = set.apply(&gone);
        assert_eq!(keys(&c), ks(&[('-', "10.0.0.1"), ('-', "10.0.0.2")]));
        assert!(set.is_empty());
    }

    #[test]
    fn an_unchanged_snapshot_yields_nothing() {
        let mut set = EndpointSet::new();
        let s = snapshot(vec![instance("10.0.0.1"), not_ready("10.0.0.2")]);
        assert_eq!(set.apply(&s).len(), 1);
        assert!(set.apply(&s).is_empty());
        let mut zoned = s.clone();
        zoned.instances[0].zone = Some("zone-a".into());
        assert_eq!(keys(&set.apply(&zoned)), ks(&[('~', "10.0.0.1")]));
    }
}
