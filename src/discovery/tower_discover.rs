//! tower's `Discover` over an [`EndpointStream`] (feature `tower`): a thin adapter that makes a
//! service per inserted endpoint and passes removals through.
//!
//! tower 0.5 implements `Discover` for every `TryStream<Ok = tower::discover::Change<K, S>>`;
//! [`TowerDiscover`] is such a stream, keyed by the endpoint's socket address. Order and content
//! are the [`EndpointStream`]'s (inserts before removals within one snapshot change; only usable
//! endpoints). [`EndpointChange::Update`]s are not passed on: the address is the same, so the
//! service made for it (and its connections) stays.
//!
//! **The end of the stream.** tower's balancers ignore the end of their `Discover` (p2c's
//! `Balance` goes on with the services it has), so a stream that just ended would freeze them
//! on the last endpoints, stale from then on. The stream therefore ends with a
//! `Change::Remove` of every endpoint still inserted, then `None` (the [`EndpointStream`]'s
//! rule): the balancer is left empty, and its `poll_ready` stays pending (p2c waits for
//! endpoints) instead of sending calls to addresses nobody follows any more; a
//! `tower::timeout` (or the caller's deadline) turns that into a failure. It never ends with an
//! error (`Error = Infallible`): p2c surfaces a discover error only once, from one
//! `poll_ready`, and then polls the ended stream as before.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use tower::discover::Change;

use super::changes::{EndpointChange, EndpointStream};
use super::snapshot::Instance;

/// An [`EndpointStream`] as tower's `Discover`, from [`EndpointStream::into_discover`].
///
/// ```no_run
/// # async fn demo(d: informer::discovery::ServiceDiscovery) {
/// use tower::discover::{Change, Discover};
/// fn is_discover<D: Discover>(_: &D) {}
/// let discover = d.endpoint_changes("prod", "web", "grpc").into_discover(|i| i.socket_addr());
/// is_discover(&discover);
/// # }
/// ```
pub struct TowerDiscover<F> {
    changes: EndpointStream,
    make_service: F,
}

impl<F> fmt::Debug for TowerDiscover<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TowerDiscover")
            .field("changes", &self.changes)
            .finish_non_exhaustive()
    }
}

impl EndpointStream {
    /// tower's `Discover` over this stream: `make_service` builds the service of each inserted
    /// endpoint (typically a client connecting to [`Instance::socket_addr`]); the key is the
    /// socket address. Never fails (`Error = Infallible`); ends when this stream ends, after a
    /// removal of every endpoint still inserted (see the module docs).
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let discover = d.endpoint_changes("prod", "web", "grpc").into_discover(|i| i.socket_addr());
    /// // tower::balance::p2c::Balance::new(tower::load::PendingRequestsDiscover::new(discover, ..))
    /// # let _ = discover;
    /// # }
    /// ```
    pub fn into_discover<F, S>(self, make_service: F) -> TowerDiscover<F>
    where
        F: FnMut(&Instance) -> S,
    {
        TowerDiscover {
            changes: self,
            make_service,
        }
    }
}

impl<F> TowerDiscover<F> {
    /// The change stream inside.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let discover = d.endpoint_changes("prod", "web", "grpc").into_discover(|i| i.socket_addr());
    /// assert!(discover.changes().endpoints().is_empty());
    /// # }
    /// ```
    pub fn changes(&self) -> &EndpointStream {
        &self.changes
    }
}

impl<F, S> Stream for TowerDiscover<F>
where
    F: FnMut(&Instance) -> S + Unpin,
{
    type Item = Result<Change<SocketAddr, S>, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let change = match this.changes.poll_change(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(change)) => change,
            };
            let change = match change {
                EndpointChange::Insert(key, instance) => {
                    Change::Insert(key, (this.make_service)(&instance))
                }
                EndpointChange::Remove(key, _) => Change::Remove(key),
                EndpointChange::Update(..) => continue,
            };
            return Poll::Ready(Some(Ok(change)));
        }
    }
}
