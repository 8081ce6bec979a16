//! [`LeaderElector`]: client-go's `tryAcquireOrRenew` loop on one Lease, with a fence.

use std::collections::BTreeMap;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Sleep, sleep_until};

use super::lease::{LeaseLock, LeaseSpec, MicroTimes, StoredLease, WallClock};
use super::{FencingToken, LeaderElectionConfig, LeadershipEvent};
use crate::client::Client;
use crate::error::Result;
use crate::rng::Rng;
use crate::workqueue::FenceToken;

/// How far below RetryPeriod a follower's next attempt may be drawn (client-go's jitter goes the
/// other way, up to 2.2 × RetryPeriod; drawn below, a released Lease is taken within RetryPeriod).
const JITTER: f64 = 0.2;

/// How many writes a release tries when each meets a conflict with a Lease this elector still
/// holds (each conflict is another writer's update, a label say, between a read and a write).
const RELEASE_ATTEMPTS: u32 = 3;

/// Runs leader election for one identity on one Lease.
///
/// See the [module documentation](super) for the protocol and what the fence guarantees.
///
/// ```no_run
/// # async fn demo(client: informer::Client) -> informer::Result<()> {
/// use informer::leaderelection::{LeaderElectionConfig, LeaderElector, LeadershipEvent};
/// let mut elector = LeaderElector::new(client, "default", "my-controller", "pod-a",
///                                      LeaderElectionConfig::default())?;
/// let mut events = elector.events();
/// tokio::spawn(elector.run(std::future::pending()));
/// while let Some(event) = events.recv().await {
///     if let LeadershipEvent::StartedLeading(token) = event {
///         println!("leading as {token}");
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderElector {
    lock: LeaseLock,
    identity: String,
    config: LeaderElectionConfig,
    labels: BTreeMap<String, String>,
    fence: watch::Sender<Option<FencingToken>>,
    events: mpsc::Sender<LeadershipEvent>,
    events_rx: Option<mpsc::Receiver<LeadershipEvent>>,
    rng: Rng,
    wall_clock: WallClock,
}

/// What the loop knows between attempts.
struct Election {
    /// The Lease as last read or written, and when its spec was first seen as it is (or, once
    /// `gone`, when it was first found missing).
    observed: Option<StoredLease>,
    observed_at: Instant,
    /// The last read found no Lease (deleted): `observed` is the Lease as it was before.
    gone: bool,
    /// While leading: when the fence closes (send time of the last successful write plus
    /// RenewDeadline) and the token it carries.
    leading: Option<(Instant, FencingToken)>,
    /// A leadership won by creating the Lease (or found held by this identity unawares), and
    /// the instant from which a successful renewal opens its fence (LeaseDuration after this
    /// elector learned of it): a Lease missing now may have been deleted under a holder cut off
    /// from the server, whose fence stays open until RenewDeadline after its last renewal,
    /// which came before the deletion and so before the creation's answer.
    created: Option<(Instant, FencingToken)>,
    /// The holder last reported as new leader.
    reported_leader: Option<String>,
    /// The times written into the Lease.
    clock: MicroTimes,
}

impl LeaderElector {
    /// How many [`events`](Self::events) the stream holds unread; more are dropped.
    pub const EVENTS_CAPACITY: usize = 64;

    /// An elector for `identity` on the Lease `namespace/name`. Fails if `config` breaks
    /// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0, or `identity` is empty.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// assert!(LeaderElector::new(client.clone(), "default", "l", "a", LeaderElectionConfig::default()).is_ok());
    /// assert!(LeaderElector::new(client, "default", "l", "", LeaderElectionConfig::default()).is_err());
    /// ```
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        config: LeaderElectionConfig,
    ) -> Result<LeaderElector> {
        config.validate()?;
        if identity.is_empty() {
            return Err(crate::Error::Config(
                "leader election needs a non-empty identity".into(),
            ));
        }
        let (fence, _) = watch::channel(None);
        let (events, events_rx) = mpsc::channel(Self::EVENTS_CAPACITY);
        let mut seed = Rng::new();
        Ok(LeaderElector {
            lock: LeaseLock::new(client, namespace, name),
            identity: identity.to_string(),
            config,
            labels: BTreeMap::new(),
            fence,
            events,
            events_rx: Some(events_rx),
            rng: Rng::with_seed(seed.u64()),
            wall_clock: WallClock::default(),
        })
    }

    /// Labels merged into the Lease on every write (the sharding ring's label, for instance).
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// let elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default())
    ///     .unwrap()
    ///     .labels([("app".to_string(), "web".to_string())].into());
    /// ```
    pub fn labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// Seeds the jitter of the acquire retries (for reproducible tests).
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// let elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default())
    ///     .unwrap()
    ///     .jitter_seed(7);
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.rng = Rng::with_seed(seed);
        self
    }

    /// The wall clock written into the Lease's `acquireTime` and `renewTime`, read at each write;
    /// `SystemTime::now` unless set (tests set one they can step). Only readers of those fields
    /// use it (the timebertt sharder compares `renewTime` with its own clock): expiry is judged
    /// on the runtime's monotonic clock, from when a change of the Lease was first seen.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// use std::time::{Duration, SystemTime};
    /// let elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default())
    ///     .unwrap()
    ///     .wall_clock(|| SystemTime::now() + Duration::from_secs(3600));
    /// ```
    pub fn wall_clock(mut self, now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.wall_clock = WallClock::new(now);
        self
    }

    /// This elector's identity.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// let elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default()).unwrap();
    /// assert_eq!(elector.identity(), "a");
    /// ```
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The fence: `Some(token)` while this elector leads and its last successful write was sent
    /// less than RenewDeadline ago, `None` otherwise. Give it to
    /// [`Controller::run_fenced`](crate::workqueue::Controller::run_fenced) or
    /// [`WorkerPool::run_fenced`](crate::workqueue::WorkerPool::run_fenced).
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// let elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default()).unwrap();
    /// assert!(elector.fence().borrow().is_none());
    /// ```
    pub fn fence(&self) -> watch::Receiver<Option<FencingToken>> {
        self.fence.subscribe()
    }

    /// The stream of leadership changes, in order (taken once; later calls get a stream that
    /// ends at once). It ends when the elector has returned.
    ///
    /// It is for observing: the [fence](Self::fence) is what work obeys. Events are kept only if
    /// the stream was taken before [`run`](Self::run), and at most
    /// [`EVENTS_CAPACITY`](Self::EVENTS_CAPACITY) of them unread: while the stream is that far
    /// behind, new events are dropped (with a warning) and the election goes on undisturbed.
    ///
    /// ```
    /// # let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// # use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// let mut elector = LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default()).unwrap();
    /// let events = elector.events();
    /// ```
    pub fn events(&mut self) -> mpsc::Receiver<LeadershipEvent> {
        self.events_rx.take().unwrap_or_else(|| mpsc::channel(1).1)
    }

    /// Runs the election until `shutdown` completes, then releases the Lease if this elector
    /// holds it (an empty holder, so another candidate takes it at its next attempt) and
    /// returns. Dropping the future instead stops without releasing (a crash, as far as the
    /// others can tell).
    ///
    /// Complete `shutdown` only once the work done under the fence has stopped (the workers have
    /// returned): after a release another replica leads within RetryPeriod, beside anything
    /// still running (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # async fn demo(elector: informer::leaderelection::LeaderElector) {
    /// elector.run(tokio::time::sleep(std::time::Duration::from_secs(60))).await;
    /// # }
    /// ```
    pub async fn run<S: Future<Output = ()>>(mut self, shutdown: S) {
        // Nobody took the events: keep none (every send now fails at once).
        self.events_rx = None;
        let mut shutdown = pin!(shutdown);
        let mut election = Election {
            observed: None,
            observed_at: Instant::now(),
            gone: false,
            leading: None,
            created: None,
            reported_leader: None,
            clock: MicroTimes::new(self.wall_clock.clone()),
        };
        let mut next_attempt = Instant::now();
        // client-go's gauge: 0 until this elector leads.
        #[cfg(feature = "metrics")]
        crate::metrics::set_leader(self.lock.name(), false);
        loop {
            // The first of: shutdown, the fence's deadline, the next attempt.
            let deadline = election.leading.as_ref().map(|(at, _)| *at);
            match wait(shutdown.as_mut(), deadline, next_attempt).await {
                Wake::Shutdown => break,
                Wake::Deadline => {
                    if election.leading.is_some() {
                        tracing::warn!(
                            lease = %self.lock.describe(),
                            identity = %self.identity,
                            "lost the lease: no renewal succeeded within the renew deadline; \
                             fence closed"
                        );
                    }
                    self.stop_leading(&mut election);
                    continue;
                }
                Wake::Attempt => {}
            }
            let sent = Instant::now();
            // An attempt never outlives the fence: at its deadline the request is given up.
            let limit = deadline.map_or(sent + self.config.renew_deadline, |d| {
                d.min(sent + self.config.renew_deadline)
            });
            let attempt = self.try_acquire_or_renew(&mut election, sent);
            let outcome = match race(attempt, shutdown.as_mut(), limit).await {
                Raced::Done(outcome) => outcome,
                Raced::Shutdown => break,
                Raced::TimedOut => Outcome::Failed,
            };
            self.report_leader(&mut election);
            match outcome {
                Outcome::Created(token) => {
                    // LeaseDuration from now, when this elector learned of the leadership: the
                    // write that made it the holder reached the server before now, however long
                    // it took on the way.
                    if !election.created.as_ref().is_some_and(|(_, t)| *t == token) {
                        tracing::info!(
                            lease = %self.lock.describe(),
                            identity = %self.identity,
                            opens_in = ?self.config.lease_duration,
                            "holding a lease this elector created or did not know it held; the \
                             fence opens at the first renewal after LeaseDuration (an earlier \
                             holder may not know yet)"
                        );
                        self.stop_leading(&mut election);
                        election.created =
                            Some((Instant::now() + self.config.lease_duration, token));
                    }
                    next_attempt = sent + self.config.retry_period;
                }
                Outcome::Leading(token) => {
                    if let Some((opens_at, created)) = election.created.take() {
                        if created == token && sent < opens_at {
                            election.created = Some((opens_at, created));
                            next_attempt = sent + self.config.retry_period;
                            continue;
                        }
                    }
                    let fence_until = sent + self.config.renew_deadline;
                    // A renewal of the leadership whose token is in the fence moves that
                    // token's window on. Another token while leading (the Lease was emptied
                    // under this elector and taken again) is another leadership, and so is a
                    // renewal that comes back after the fence's token lapsed (a token that
                    // stopped holding never holds again): the fence closes and opens with it.
                    let renewed = match election.leading.take() {
                        Some((_, leading)) if leading == token && leading.holds() => Some(leading),
                        other => {
                            election.leading = other;
                            self.stop_leading(&mut election);
                            None
                        }
                    };
                    let newly = renewed.is_none();
                    let token = renewed.unwrap_or(token);
                    token.hold_until(fence_until);
                    election.leading = Some((fence_until, token.clone()));
                    if newly {
                        tracing::info!(
                            lease = %self.lock.describe(),
                            identity = %self.identity,
                            transitions = token.transitions,
                            "became leader"
                        );
                        self.fence.send_replace(Some(token.clone()));
                        #[cfg(feature = "metrics")]
                        crate::metrics::set_leader(self.lock.name(), true);
                        self.emit(LeadershipEvent::StartedLeading(token));
                    }
                    next_attempt = sent + self.config.retry_period;
                }
                Outcome::HeldByOther { expires } => {
                    // Someone else holds a valid Lease: whatever this elector believed, it
                    // does not lead any more.
                    if election.leading.is_some() {
                        tracing::warn!(
                            lease = %self.lock.describe(),
                            identity = %self.identity,
                            holder = election.reported_leader.as_deref().unwrap_or_default(),
                            "lost the lease to another holder; fence closed"
                        );
                    }
                    self.stop_leading(&mut election);
                    election.created = None;
                    next_attempt = self.follower_retry().min(expires);
                }
                Outcome::Gone => {
                    tracing::warn!(
                        lease = %self.lock.describe(),
                        identity = %self.identity,
                        "lost the lease: it was deleted; fence closed"
                    );
                    self.stop_leading(&mut election);
                    election.created = None;
                    next_attempt = self.follower_retry();
                }
                Outcome::Failed => {
                    if let Some((fence_until, _)) = &election.leading {
                        tracing::warn!(
                            lease = %self.lock.describe(),
                            identity = %self.identity,
                            fence_closes_in = ?fence_until.saturating_duration_since(Instant::now()),
                            "renewing the lease failed; retrying"
                        );
                    }
                    next_attempt = if election.leading.is_some() {
                        sent + self.config.retry_period
                    } else {
                        self.follower_retry()
                    };
                }
            }
        }
        self.release(&mut election).await;
    }

    fn follower_retry(&mut self) -> Instant {
        let factor = 1.0 - JITTER * self.rng.f64();
        Instant::now() + self.config.retry_period.mul_f64(factor)
    }

    fn stop_leading(&self, election: &mut Election) {
        if let Some((_, token)) = election.leading.take() {
            token.close();
            self.fence.send_replace(None);
            #[cfg(feature = "metrics")]
            crate::metrics::set_leader(self.lock.name(), false);
            self.emit(LeadershipEvent::StoppedLeading);
        }
    }

    /// Reports the observed holder if it changed (client-go's `maybeReportTransition`).
    fn report_leader(&self, election: &mut Election) {
        let Some(observed) = &election.observed else {
            return;
        };
        let holder = observed.spec.holder();
        if election.reported_leader.as_deref() != Some(holder) {
            election.reported_leader = Some(holder.to_string());
            self.emit(LeadershipEvent::NewLeader {
                holder: holder.to_string(),
                transitions: observed.spec.lease_transitions.unwrap_or(0),
            });
        }
    }

    /// Sends `event` to the events stream if it was taken and has room; never waits.
    fn emit(&self, event: LeadershipEvent) {
        if let Err(TrySendError::Full(event)) = self.events.try_send(event) {
            tracing::warn!(
                lease = %self.lock.describe(),
                identity = %self.identity,
                ?event,
                "the leadership events stream is full (not read); event dropped"
            );
        }
    }

    /// Records `lease` as observed; its spec's first sighting starts the expiry clock.
    fn observe(election: &mut Election, lease: StoredLease, now: Instant) {
        let changed = election.gone
            || election
                .observed
                .as_ref()
                .is_none_or(|o| o.spec != lease.spec);
        if changed {
            election.observed_at = now;
        }
        election.observed = Some(lease);
        election.gone = false;
    }

    /// Records that the Lease is missing; its first sighting is a change like any other and
    /// starts the expiry clock of the Lease as it was last seen.
    fn observe_gone(election: &mut Election, now: Instant) {
        if !election.gone {
            election.gone = true;
            election.observed_at = now;
        }
    }

    fn lease_valid(election: &Election, now: Instant) -> Option<Instant> {
        let observed = election.observed.as_ref()?;
        let seconds = observed.spec.lease_duration_seconds.unwrap_or(0).max(0) as u64;
        let expires = election.observed_at + Duration::from_secs(seconds);
        (expires > now).then_some(expires)
    }

    /// One round of client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self, election: &mut Election, now: Instant) -> Outcome {
        let renew_time = election.clock.now_micro_time();
        let ours = |holder: &str| holder == self.identity;
        let mut record = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs() as i32),
            acquire_time: Some(renew_time.clone()),
            renew_time: Some(renew_time),
            lease_transitions: Some(0),
        };

        // 1. The leader's fast path: update what it wrote last time.
        if let Some(observed) = election.observed.clone().filter(|_| !election.gone) {
            if ours(observed.spec.holder()) && Self::lease_valid(election, now).is_some() {
                record.acquire_time = observed.spec.acquire_time.clone();
                record.lease_transitions = observed.spec.lease_transitions;
                if let Ok(written) = self.lock.update(&observed, &record, &self.labels).await {
                    return self.wrote(election, written, now);
                }
            }
        }

        // 2. Read (or create) the Lease.
        let current = match self.lock.get().await {
            Ok(Some(current)) => current,
            Ok(None) => {
                // Deleted (or never created). A leader leads no more: it closes its fence and
                // may create the Lease again at its next attempt, as anyone may.
                Self::observe_gone(election, Instant::now());
                if election.leading.is_some() {
                    return Outcome::Gone;
                }
                // Anyone may create it again; whoever does opens its fence only LeaseDuration
                // later (`Outcome::Created`), by when the holder of the deleted Lease, cut off
                // from the server maybe, has closed its own.
                // Count transitions on from the Lease last seen, so that the new leadership's
                // token is larger than the old one's (client-go starts again at 0).
                record.lease_transitions = Some(
                    election
                        .observed
                        .as_ref()
                        .map_or(0, |o| o.spec.lease_transitions.unwrap_or(0) + 1),
                );
                return match self.lock.create(&record, &self.labels).await {
                    Ok(written) => match self.wrote(election, written, now) {
                        Outcome::Leading(token) => Outcome::Created(token),
                        other => other,
                    },
                    Err(error) => {
                        tracing::debug!(%error, "creating the lease failed");
                        Outcome::Failed
                    }
                };
            }
            Err(error) => {
                tracing::debug!(%error, "reading the lease failed");
                return Outcome::Failed;
            }
        };
        Self::observe(election, current.clone(), Instant::now());

        // 3. Held by someone else and not expired: follow.
        let holder = current.spec.holder().to_string();
        if !holder.is_empty() && !ours(&holder) {
            if let Some(expires) = Self::lease_valid(election, now) {
                return Outcome::HeldByOther { expires };
            }
        }

        // 4. Take it over (or renew it on the slow path).
        let transitions = current.spec.lease_transitions.unwrap_or(0);
        if ours(&holder) {
            record.acquire_time = current.spec.acquire_time.clone();
            record.lease_transitions = Some(transitions);
        } else {
            record.lease_transitions = Some(transitions + 1);
        }
        // Held by this elector, which did not know it (not leading): a write whose answer it
        // never got (a create, a takeover), or an earlier process with its identity. Its fence
        // may open only as a created Lease's does.
        let unknown = ours(&holder) && election.leading.is_none();
        match self.lock.update(&current, &record, &self.labels).await {
            Ok(written) => match self.wrote(election, written, now) {
                Outcome::Leading(token) if unknown => Outcome::Created(token),
                other => other,
            },
            Err(error) => {
                tracing::debug!(%error, "updating the lease failed (a lost race is a conflict)");
                Outcome::Failed
            }
        }
    }

    fn wrote(&self, election: &mut Election, written: StoredLease, now: Instant) -> Outcome {
        let token = FencingToken::new(
            self.identity.clone(),
            written.spec.lease_transitions.unwrap_or(0),
            written.spec.acquire_time.clone().unwrap_or_default(),
        );
        Self::observe(election, written, now);
        Outcome::Leading(token)
    }

    /// client-go's `release`: if this elector holds the Lease, write an empty holder with a one
    /// second duration (transitions unchanged), with the resourceVersion last seen; on a conflict
    /// (someone wrote the Lease since, a label say) read it again and release it with the fresh
    /// resourceVersion if this elector still holds it (see [`write_release`](Self::write_release)).
    async fn release(&mut self, election: &mut Election) {
        self.stop_leading(election);
        let Some(observed) = election.observed.clone() else {
            return;
        };
        if election.gone || observed.spec.holder() != self.identity {
            return;
        }
        let write = self.write_release(&mut election.clock, observed);
        match tokio::time::timeout(self.config.renew_deadline, write).await {
            Ok(Ok(Some(written))) => {
                tracing::info!(
                    lease = %self.lock.describe(),
                    identity = %self.identity,
                    "released the lease"
                );
                Self::observe(election, written, Instant::now());
                self.report_leader(election);
            }
            Ok(Ok(None)) => tracing::info!(
                lease = %self.lock.describe(),
                identity = %self.identity,
                "not releasing the lease: it is no longer held by this elector"
            ),
            Ok(Err(error)) => tracing::warn!(
                lease = %self.lock.describe(),
                identity = %self.identity,
                %error,
                "releasing the lease failed; it expires by itself"
            ),
            Err(_) => tracing::warn!(
                lease = %self.lock.describe(),
                identity = %self.identity,
                "releasing the lease timed out; it expires by itself"
            ),
        }
    }

    /// Writes the release onto `base`. A conflict means the Lease changed since `base` was read:
    /// it is read again and, if this elector still holds it, released with the fresh
    /// resourceVersion (at most [`RELEASE_ATTEMPTS`] writes). `None`: the Lease is gone or held
    /// by someone else, and is left alone.
    async fn write_release(
        &self,
        clock: &mut MicroTimes,
        mut base: StoredLease,
    ) -> Result<Option<StoredLease>> {
        let mut attempts = 1;
        loop {
            let now = clock.now_micro_time();
            let record = LeaseSpec {
                holder_identity: Some(String::new()),
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: base.spec.lease_transitions,
            };
            match self.lock.update(&base, &record, &self.labels).await {
                Ok(written) => return Ok(Some(written)),
                Err(error) if error.is_conflict() && attempts < RELEASE_ATTEMPTS => {
                    tracing::debug!(%error, "releasing the lease met a conflict; reading it again");
                    match self.lock.get().await? {
                        Some(current) if current.spec.holder() == self.identity => base = current,
                        _ => return Ok(None),
                    }
                    attempts += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// A dropped elector (its `run` future dropped or its task aborted while leading) closes its
/// fence first: workers read the `None`, not the last token a closed channel keeps, and stop
/// (the Lease is left to expire; nobody renews it).
impl Drop for LeaderElector {
    fn drop(&mut self) {
        self.fence.send_replace(None);
    }
}

/// The result of one attempt.
enum Outcome {
    /// This elector wrote the Lease as its holder.
    Leading(FencingToken),
    /// This elector holds a Lease it created (it was missing), or found held by its identity
    /// without knowing it; its fence opens later.
    Created(FencingToken),
    /// Another holder's Lease is valid until `expires` (local clock).
    HeldByOther { expires: Instant },
    /// The Lease this elector led on was found deleted.
    Gone,
    /// The server could not be reached, refused, or another candidate won the race.
    Failed,
}

enum Wake {
    Shutdown,
    Deadline,
    Attempt,
}

/// Waits for the first of `shutdown`, `deadline` (if any) and `attempt_at`, polled in that order.
async fn wait<S: Future<Output = ()>>(
    mut shutdown: std::pin::Pin<&mut S>,
    deadline: Option<Instant>,
    attempt_at: Instant,
) -> Wake {
    let mut deadline: Option<std::pin::Pin<Box<Sleep>>> =
        deadline.map(|d| Box::pin(sleep_until(d)));
    let mut attempt = pin!(sleep_until(attempt_at));
    poll_fn(|cx| {
        if shutdown.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Wake::Shutdown);
        }
        if let Some(d) = deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Deadline);
            }
        }
        attempt.as_mut().poll(cx).map(|_| Wake::Attempt)
    })
    .await
}

enum Raced<T> {
    Done(T),
    Shutdown,
    TimedOut,
}

/// Runs `work` until it finishes, `shutdown` completes, or `limit` passes.
async fn race<T, W: Future<Output = T>, S: Future<Output = ()>>(
    work: W,
    mut shutdown: std::pin::Pin<&mut S>,
    limit: Instant,
) -> Raced<T> {
    let mut work = pin!(work);
    let mut limit = pin!(sleep_until(limit));
    poll_fn(|cx| {
        if let Poll::Ready(t) = work.as_mut().poll(cx) {
            return Poll::Ready(Raced::Done(t));
        }
        if shutdown.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Raced::Shutdown);
        }
        limit.as_mut().poll(cx).map(|_| Raced::TimedOut)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events nobody took are not kept: a running elector drops the stream's receiver if nobody
    /// took it, so its sends fail at once instead of piling up for the elector's life (a
    /// [`Shard`](crate::sharding::Shard) never hands its events out). (#46)
    #[tokio::test]
    async fn events_nobody_took_are_not_kept() {
        let config = crate::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = Client::new(config).unwrap();
        let elector =
            LeaderElector::new(client, "default", "l", "a", LeaderElectionConfig::default())
                .unwrap();
        let events = elector.events.clone();
        let mut run = pin!(elector.run(std::future::pending()));
        poll_fn(|cx| {
            let _ = run.as_mut().poll(cx);
            Poll::Ready(())
        })
        .await;
        assert!(events.is_closed());
    }
}
