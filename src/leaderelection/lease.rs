//! The `coordination.k8s.io/v1` Lease as the elector reads and writes it: get, create and
//! replace with the resourceVersion it read, through an [`Api`] of the library's own [`Client`].
//!
//! Invariant: every update carries the `metadata.resourceVersion` of the object it was built from,
//! so a write racing another is answered `409 Conflict` and never overwrites it. An update starts
//! from the whole object as read (labels, annotations and fields this module does not know are
//! kept), replaces `spec`, and merges the labels it is given.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::client::{Api, Client, PostParams};
use crate::error::{Error, Result};
use crate::model::time::{format_rfc3339, parse_rfc3339};
use crate::model::{ApiResource, DynamicObject};

/// `spec` of a Lease, as client-go's `LeaseSpec` (the fields leader election uses).
///
/// ```
/// use informer::leaderelection::LeaseSpec;
/// let spec: LeaseSpec = serde_json::from_str(r#"{"holderIdentity":"a","leaseDurationSeconds":15}"#).unwrap();
/// assert_eq!(spec.holder_identity.as_deref(), Some("a"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    /// Who holds the Lease; empty or absent: nobody (released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    /// How long a candidate waits, from when it saw the Lease last change, before taking it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// When the current holder acquired it (`MicroTime`, see [`format_micro_time`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_time: Option<String>,
    /// When the holder last renewed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<String>,
    /// How many times the Lease changed hands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_transitions: Option<i32>,
}

impl LeaseSpec {
    /// The holder, `""` when none.
    ///
    /// ```
    /// assert_eq!(informer::leaderelection::LeaseSpec::default().holder(), "");
    /// ```
    pub fn holder(&self) -> &str {
        self.holder_identity.as_deref().unwrap_or("")
    }
}

/// A Lease as last read or written: the whole object, its spec and its resourceVersion.
#[derive(Clone, Debug)]
pub struct StoredLease {
    /// The object as the server returned it.
    pub object: DynamicObject,
    /// Its `spec`, decoded.
    pub spec: LeaseSpec,
    /// Its `metadata.resourceVersion`, the precondition of the next update.
    pub resource_version: String,
}

impl StoredLease {
    fn from_object(object: DynamicObject) -> Result<StoredLease> {
        let spec = match object.data.get("spec") {
            Some(spec) => serde_json::from_value(spec.clone())
                .map_err(|e| Error::Protocol(format!("a Lease whose spec does not decode: {e}")))?,
            None => LeaseSpec::default(),
        };
        let resource_version = object.metadata.resource_version.to_string();
        Ok(StoredLease {
            object,
            spec,
            resource_version,
        })
    }

    /// The Lease's labels.
    ///
    /// ```
    /// # use informer::leaderelection::StoredLease;
    /// # fn demo(lease: &StoredLease) {
    /// let ring = lease.labels().get("alpha.sharding.timebertt.dev/controllerring");
    /// # }
    /// ```
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.object
            .metadata
            .labels
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// Where Leases live in the API.
const LEASES: ApiResource =
    ApiResource::from_static("coordination.k8s.io", "v1", "Lease", "leases", true);

/// One Lease on one apiserver: `namespace/name`.
///
/// ```no_run
/// # async fn demo(client: informer::Client) -> informer::Result<()> {
/// use informer::leaderelection::LeaseLock;
/// let lock = LeaseLock::new(client, "kube-system", "my-controller");
/// if let Some(lease) = lock.get().await? {
///     println!("held by {:?}", lease.spec.holder());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LeaseLock {
    api: Api<DynamicObject>,
    namespace: String,
    name: String,
}

impl LeaseLock {
    /// The Lease `name` in `namespace`.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// let lock = informer::leaderelection::LeaseLock::new(client, "default", "leader");
    /// assert_eq!(lock.describe(), "default/leader");
    /// ```
    pub fn new(client: Client, namespace: &str, name: &str) -> LeaseLock {
        LeaseLock {
            api: Api::namespaced_with(client, namespace, LEASES),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// `namespace/name`, for messages.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # let lock = informer::leaderelection::LeaseLock::new(client, "ns", "l");
    /// assert_eq!(lock.describe(), "ns/l");
    /// ```
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Lease's name.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # let lock = informer::leaderelection::LeaseLock::new(client, "ns", "l");
    /// assert_eq!(lock.name(), "l");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Lease, or `None` if it does not exist.
    ///
    /// ```no_run
    /// # async fn demo(lock: informer::leaderelection::LeaseLock) -> informer::Result<()> {
    /// let exists = lock.get().await?.is_some();
    /// # Ok(()) }
    /// ```
    pub async fn get(&self) -> Result<Option<StoredLease>> {
        match self.api.get(&self.name).await {
            Ok(object) => StoredLease::from_object(object).map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the Lease with `spec` and `labels`; `409 AlreadyExists` if someone was first.
    ///
    /// ```no_run
    /// # async fn demo(lock: informer::leaderelection::LeaseLock) -> informer::Result<()> {
    /// use informer::leaderelection::LeaseSpec;
    /// let spec = LeaseSpec { holder_identity: Some("me".into()), ..Default::default() };
    /// lock.create(&spec, &Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create(
        &self,
        spec: &LeaseSpec,
        labels: &BTreeMap<String, String>,
    ) -> Result<StoredLease> {
        let mut lease = DynamicObject::default();
        lease.metadata.name = self.name.clone();
        lease.metadata.namespace = self.namespace.clone();
        for (k, v) in labels {
            lease.metadata.labels.insert(k.clone(), v.clone());
        }
        lease.data.insert("spec".into(), json!(spec));
        let object = self.api.create(&PostParams::default(), &lease).await?;
        StoredLease::from_object(object)
    }

    /// Replaces `base`'s spec with `spec`, merges `labels` into its labels, and updates it with
    /// `base`'s resourceVersion: `409 Conflict` if the Lease changed since `base` was read.
    ///
    /// ```no_run
    /// # async fn demo(lock: informer::leaderelection::LeaseLock) -> informer::Result<()> {
    /// let lease = lock.get().await?.expect("exists");
    /// let mut spec = lease.spec.clone();
    /// spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    /// lock.update(&lease, &spec, &Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update(
        &self,
        base: &StoredLease,
        spec: &LeaseSpec,
        labels: &BTreeMap<String, String>,
    ) -> Result<StoredLease> {
        let mut lease = base.object.clone();
        lease.data.insert("spec".into(), json!(spec));
        for (k, v) in labels {
            lease.metadata.labels.insert(k.clone(), v.clone());
        }
        lease.metadata.resource_version = base.resource_version.as_str().into();
        let object = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await?;
        StoredLease::from_object(object)
    }
}

/// `time` as a Kubernetes `MicroTime`: RFC 3339 in UTC with exactly six fractional digits
/// (`2026-12-04T21:00:00.123456Z`), the only form the apiserver decodes in a Lease.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use informer::leaderelection::format_micro_time;
/// let t = SystemTime::UNIX_EPOCH + Duration::from_micros(951_868_800_000_042);
/// assert_eq!(format_micro_time(t), "2000-03-01T00:00:00.000042Z");
/// ```
pub fn format_micro_time(time: SystemTime) -> String {
    let micros = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_micros())
        .unwrap_or(0);
    let seconds = format_rfc3339(time);
    let seconds = seconds.strip_suffix('Z').unwrap_or(&seconds);
    format!("{seconds}.{micros:06}Z")
}

/// Parses a `MicroTime` (or any RFC 3339 time).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use informer::leaderelection::parse_micro_time;
/// let t = parse_micro_time("1970-01-01T00:00:01.000002Z").unwrap();
/// assert_eq!(t, SystemTime::UNIX_EPOCH + Duration::from_micros(1_000_002));
/// ```
pub fn parse_micro_time(text: &str) -> Option<SystemTime> {
    parse_rfc3339(text)
}

/// The wall clock an elector writes into `acquireTime` and `renewTime`: `SystemTime::now` unless
/// a test injects another ([`LeaderElector::wall_clock`](super::LeaderElector::wall_clock)).
#[derive(Clone)]
pub(crate) struct WallClock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl WallClock {
    pub(crate) fn new(now: impl Fn() -> SystemTime + Send + Sync + 'static) -> WallClock {
        WallClock(Arc::new(now))
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new(SystemTime::now)
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WallClock")
    }
}

/// The `MicroTime`s of one election: the wall clock read at each write (as client-go does), so
/// that readers comparing `renewTime` with their own clock (the timebertt sharder) see the time
/// of the write even after an NTP step, a VM pause or a suspend. Two consecutive writes never
/// carry the same time (a microsecond is added if the clock has not moved): an identical update
/// would be a no-op on the server and look to the others like no renewal at all.
#[derive(Debug)]
pub(crate) struct MicroTimes {
    clock: WallClock,
    last_micros: Option<u128>,
}

impl MicroTimes {
    pub(crate) fn new(clock: WallClock) -> MicroTimes {
        MicroTimes {
            clock,
            last_micros: None,
        }
    }

    /// Now on the wall clock, as a `MicroTime` other than the one this returned last.
    pub(crate) fn now_micro_time(&mut self) -> String {
        let now = (self.clock.0)();
        let mut micros = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0);
        if self.last_micros == Some(micros) {
            micros += 1;
        }
        self.last_micros = Some(micros);
        let micros = u64::try_from(micros).unwrap_or(u64::MAX);
        format_micro_time(SystemTime::UNIX_EPOCH + Duration::from_micros(micros))
    }
}
