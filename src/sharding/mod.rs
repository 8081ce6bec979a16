//! A shard of a sharding ring, compatible with
//! [timebertt/kubernetes-controller-sharding](https://github.com/timebertt/kubernetes-controller-sharding)
//! (its `docs/implement-sharding.md`, `pkg/shard/` and `pkg/sharding/leases/`): many replicas of a
//! controller each reconcile their share of the objects instead of one leader reconciling all.
//!
//! The sharder (that project's controller, running in the cluster) assigns objects to shards by
//! label; a shard only has to
//!
//! 1. **announce itself with a Lease** named after itself, held by itself, labelled
//!    `alpha.sharding.timebertt.dev/controllerring: <ring>`, with `acquireTime`, `renewTime` and
//!    `leaseDurationSeconds` always set, renewed as a leader renews its Lease, its labels merged
//!    on every update (the sharder writes `alpha.sharding.timebertt.dev/state` there), and
//!    released (empty holder) on shutdown. [`Shard`] runs a [`LeaderElector`] on that Lease:
//!    while its fence is open, the sharder reads the shard as ready (`renewTime` + duration in
//!    the future on the sharder's clock: `renewTime` is the shard's wall clock at each renewal,
//!    so the two clocks must agree within 2 × LeaseDuration − RenewDeadline, 20 s by default, see
//!    [leader election](crate::leaderelection));
//!    when a renewal has failed for RenewDeadline the fence closes and the workers stop, before
//!    the Lease expires and the sharder moves the objects. On shutdown, stop the workers first
//!    and release the Lease (complete [`Shard::run`]'s shutdown) after: the sharder moves the
//!    objects as soon as the Lease is released;
//! 2. **watch only its objects**: informers with the label selector
//!    [`label_selector`](Shard::label_selector), `shard.alpha.sharding.timebertt.dev/<ring>=<shard>`.
//!    An object moved to another shard then leaves this shard's store just as a deleted one
//!    does (a `DELETED` event, then `None` from the store): **do no cleanup on a `None`**, it
//!    would undo the other shard's work on an object that lives on. Clean up in a
//!    [`finalizer`](crate::workqueue::finalizer): an object being deleted keeps its labels, so
//!    it stays in the store of its shard, which runs the cleanup;
//! 3. **acknowledge drains**: an object labelled for this shard that also carries
//!    `drain.alpha.sharding.timebertt.dev/<ring>` is not reconciled; the shard removes both labels
//!    with a merge patch carrying the object's resourceVersion (a conflict means the object
//!    changed: it is seen again and retried), after which the sharder assigns it to another shard.
//!    [`Assigner::assignment`] says which case a key is in, [`Assigner::acknowledge_drain`]
//!    patches.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(client: informer::Client) -> informer::Result<()> {
//! use informer::leaderelection::LeaderElectionConfig;
//! use informer::reflector::ReflectorOptions;
//! use informer::sharding::{Assignment, Shard};
//! use informer::workqueue::{Action, Controller};
//! use informer::{ConfigMap, InformerFactory};
//! use std::sync::Arc;
//!
//! let shard = Shard::new(client.clone(), "operator-system", "my-ring", "my-operator-0",
//!                        LeaderElectionConfig::default())?;
//! let factory = InformerFactory::with_options(client.clone(), ReflectorOptions {
//!     label_selector: Some(shard.label_selector()),
//!     ..Default::default()
//! });
//! let controller = Controller::new(&factory.informer::<ConfigMap>(None), 4);
//! let (fence, assigner) = (shard.fence(), shard.assigner());
//! tokio::spawn(shard.run(std::future::pending()));
//! factory.start();
//! controller.run_fenced(fence, move |cm: Arc<ConfigMap>, client: Arc<informer::Client>, _token| {
//!     let assigner = assigner.clone();
//!     async move {
//!         match assigner.assignment(&cm.metadata) {
//!             Assignment::Drain => assigner.acknowledge_drain(&client, &*cm).await?,
//!             Assignment::Elsewhere => {}
//!             Assignment::Ours => { /* reconcile */ }
//!         }
//!         Ok::<_, informer::Error>(Action::Done)
//!     }
//! }, Arc::new(client), std::future::pending()).await;
//! # Ok(()) }
//! ```

use crate::model::Metadata;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::client::{Api, Client, Patch, PatchParams};
use crate::error::Result;
use crate::leaderelection::{FencingToken, LeaderElectionConfig, LeaderElector};
use crate::model::{ObjectMeta, Resource};

/// The label on a shard's Lease naming its ring.
pub const LABEL_CONTROLLER_RING: &str = "alpha.sharding.timebertt.dev/controllerring";
/// The label the sharder writes on a shard's Lease with the state it read.
pub const LABEL_STATE: &str = "alpha.sharding.timebertt.dev/state";

/// `shard.alpha.sharding.timebertt.dev/<ring>`: the label assigning an object to a shard.
///
/// ```
/// assert_eq!(informer::sharding::shard_label("web"), "shard.alpha.sharding.timebertt.dev/web");
/// ```
pub fn shard_label(ring: &str) -> String {
    format!("shard.alpha.sharding.timebertt.dev/{ring}")
}

/// `drain.alpha.sharding.timebertt.dev/<ring>`: the label asking a shard to let an object go.
///
/// ```
/// assert_eq!(informer::sharding::drain_label("web"), "drain.alpha.sharding.timebertt.dev/web");
/// ```
pub fn drain_label(ring: &str) -> String {
    format!("drain.alpha.sharding.timebertt.dev/{ring}")
}

/// Where an object stands for one shard.
///
/// ```
/// use informer::sharding::Assignment;
/// assert_ne!(Assignment::Ours, Assignment::Drain);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// Labelled for this shard, no drain: reconcile it.
    Ours,
    /// Labelled for this shard and to be drained: do not reconcile; acknowledge.
    Drain,
    /// Not (or no longer) labelled for this shard: leave it alone (it may have moved to another
    /// shard; do no cleanup).
    Elsewhere,
}

/// The labels of one shard in one ring, and the drain acknowledgement. Cheap to clone into
/// reconciles.
///
/// ```
/// use informer::sharding::{Assigner, Assignment};
/// use informer::ObjectMeta;
/// let assigner = Assigner::new("ring", "shard-0");
/// let mut meta = ObjectMeta::default();
/// meta.labels.insert("shard.alpha.sharding.timebertt.dev/ring".into(), "shard-0".into());
/// assert_eq!(assigner.assignment(&meta), Assignment::Ours);
/// meta.labels.insert("drain.alpha.sharding.timebertt.dev/ring".into(), "".into());
/// assert_eq!(assigner.assignment(&meta), Assignment::Drain);
/// ```
#[derive(Clone, Debug)]
pub struct Assigner {
    shard: String,
    shard_label: String,
    drain_label: String,
}

impl Assigner {
    /// The assigner of shard `shard` in ring `ring`.
    ///
    /// ```
    /// let assigner = informer::sharding::Assigner::new("ring", "shard-0");
    /// assert_eq!(assigner.label_selector(), "shard.alpha.sharding.timebertt.dev/ring=shard-0");
    /// ```
    pub fn new(ring: &str, shard: &str) -> Assigner {
        Assigner {
            shard: shard.to_string(),
            shard_label: shard_label(ring),
            drain_label: drain_label(ring),
        }
    }

    /// The label selector of this shard's informers.
    ///
    /// ```
    /// let assigner = informer::sharding::Assigner::new("r", "s");
    /// assert_eq!(assigner.label_selector(), "shard.alpha.sharding.timebertt.dev/r=s");
    /// ```
    pub fn label_selector(&self) -> String {
        format!("{}={}", self.shard_label, self.shard)
    }

    /// Where `meta`'s object stands for this shard. Checked again in the reconcile (the
    /// informer's selector already filters, but a requeued key may come back after a relabel).
    ///
    /// ```
    /// use informer::sharding::{Assigner, Assignment};
    /// assert_eq!(Assigner::new("r", "s").assignment(&Default::default()), Assignment::Elsewhere);
    /// ```
    pub fn assignment(&self, meta: &ObjectMeta) -> Assignment {
        if meta.labels.get(&self.shard_label) != Some(self.shard.as_str()) {
            return Assignment::Elsewhere;
        }
        if meta.labels.contains_key(&self.drain_label) {
            return Assignment::Drain;
        }
        Assignment::Ours
    }

    /// Acknowledges a drain: removes the shard and drain labels from `object` with a merge patch
    /// carrying its resourceVersion (a `409 Conflict` if it changed since: the newer version
    /// comes through the informer and is looked at again).
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client, cm: informer::ConfigMap) -> informer::Result<()> {
    /// let assigner = informer::sharding::Assigner::new("ring", "shard-0");
    /// assigner.acknowledge_drain(&client, &cm).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acknowledge_drain<T: Resource>(&self, client: &Client, object: &T) -> Result<()> {
        let meta = object.meta();
        let api: Api<T> = if T::api_resource().namespaced {
            Api::namespaced(client.clone(), meta.namespace())
        } else {
            Api::all(client.clone())
        };
        let patch = json!({"metadata": {
            "resourceVersion": meta.resource_version(),
            "labels": {self.shard_label.clone(): Value::Null, self.drain_label.clone(): Value::Null},
        }});
        api.patch(meta.name(), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
    }
}

/// One shard: its Lease (named and held by the shard, labelled with the ring) kept by a
/// [`LeaderElector`], and its [`Assigner`].
///
/// ```no_run
/// # async fn demo(client: informer::Client) -> informer::Result<()> {
/// use informer::leaderelection::LeaderElectionConfig;
/// use informer::sharding::Shard;
/// let shard = Shard::new(client, "default", "ring", "shard-0", LeaderElectionConfig::default())?;
/// let fence = shard.fence();
/// tokio::spawn(shard.run(std::future::pending()));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Shard {
    elector: LeaderElector,
    assigner: Assigner,
}

impl Shard {
    /// Shard `name` of ring `ring`, keeping the Lease `namespace/name`.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// use informer::sharding::Shard;
    /// let shard = Shard::new(client, "default", "ring", "shard-0", Default::default()).unwrap();
    /// assert_eq!(shard.label_selector(), "shard.alpha.sharding.timebertt.dev/ring=shard-0");
    /// ```
    pub fn new(
        client: Client,
        namespace: &str,
        ring: &str,
        name: &str,
        config: LeaderElectionConfig,
    ) -> Result<Shard> {
        let labels = BTreeMap::from([(LABEL_CONTROLLER_RING.to_string(), ring.to_string())]);
        let elector = LeaderElector::new(client, namespace, name, name, config)?.labels(labels);
        Ok(Shard {
            elector,
            assigner: Assigner::new(ring, name),
        })
    }

    /// The wall clock written into the Lease as `renewTime` and `acquireTime`, which the
    /// sharder compares with its own (see [`LeaderElector::wall_clock`]); `SystemTime::now` by
    /// default.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// use std::time::{Duration, SystemTime};
    /// let shard = informer::sharding::Shard::new(client, "default", "r", "s", Default::default())
    ///     .unwrap()
    ///     .wall_clock(|| SystemTime::now() - Duration::from_secs(3));
    /// ```
    pub fn wall_clock(mut self, now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.elector = self.elector.wall_clock(now);
        self
    }

    /// The label selector of this shard's informers.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # let shard = informer::sharding::Shard::new(client, "default", "r", "s", Default::default()).unwrap();
    /// assert_eq!(shard.label_selector(), "shard.alpha.sharding.timebertt.dev/r=s");
    /// ```
    pub fn label_selector(&self) -> String {
        self.assigner.label_selector()
    }

    /// The assigner, to clone into reconciles.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # let shard = informer::sharding::Shard::new(client, "default", "r", "s", Default::default()).unwrap();
    /// let assigner = shard.assigner();
    /// ```
    pub fn assigner(&self) -> Assigner {
        self.assigner.clone()
    }

    /// The fence of the shard's Lease: `Some` while it holds and renews it (see
    /// [`LeaderElector::fence`]).
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # let shard = informer::sharding::Shard::new(client, "default", "r", "s", Default::default()).unwrap();
    /// assert!(shard.fence().borrow().is_none());
    /// ```
    pub fn fence(&self) -> watch::Receiver<Option<FencingToken>> {
        self.elector.fence()
    }

    /// Keeps the Lease until `shutdown` completes, then releases it. Complete `shutdown` only
    /// after the workers have stopped: once the Lease is released the sharder moves this
    /// shard's objects to others.
    ///
    /// ```no_run
    /// # async fn demo(shard: informer::sharding::Shard) {
    /// shard.run(tokio::time::sleep(std::time::Duration::from_secs(60))).await;
    /// # }
    /// ```
    pub async fn run<S: Future<Output = ()>>(self, shutdown: S) {
        self.elector.run(shutdown).await
    }
}
