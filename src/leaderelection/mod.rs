//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics, and a fence
//! for the work done while leading.
//!
//! Several replicas of a controller run a [`LeaderElector`] each on the same Lease; one leads,
//! the others follow and take over when it stops renewing. Nothing new is needed in the
//! cluster: the Lease is an ordinary object, and every write is an update with the
//! resourceVersion last read, so of two candidates racing for it one wins and the other gets
//! `409 Conflict` (a lost race, never an overwrite).
//!
//! # The protocol (client-go's `tools/leaderelection`)
//!
//! * Every attempt reads the Lease (the leader first tries to update what it wrote last time).
//!   A Lease held by someone else is **valid** until LeaseDuration (its `leaseDurationSeconds`)
//!   after this replica first saw its spec as it is now: validity is judged on the local clock
//!   from the last observed change, never from the `renewTime` written in it, so the electors'
//!   clocks need not agree (readers that compare `renewTime` with their own clock are another
//!   matter: see *Wall-clock offsets* below).
//! * A missing Lease is created; an expired or released one (empty holder) is taken over: holder
//!   set, `acquireTime` = now, `leaseTransitions` + 1.
//! * **A Lease this elector created opens its fence only LeaseDuration later** (at its first
//!   successful renewal from then on; client-go leads at once). A missing Lease may have been
//!   deleted a moment ago under a holder cut off from the server, whose fence stays open until
//!   RenewDeadline after its last renewal; that renewal came before the deletion, so before the
//!   creation, and LeaseDuration after the creation its fence has closed. An elector cannot tell
//!   such a deletion from a first start (a replica started after the deletion never saw the
//!   Lease), so the first leader of a new Lease also leads LeaseDuration after its start (15 s
//!   by default) rather than at once: the price of no two leaders when a Lease is deleted. The
//!   Lease is held and renewed meanwhile, so the others follow. So does a Lease found held by
//!   this elector's own identity without its knowing (a write whose answer never came back, or
//!   an earlier process with the same identity, which may still be running, cut off): its
//!   fence opens LeaseDuration after the elector found it, where client-go leads at once.
//! * A Lease found **deleted** is a change like any other. A leader that finds its Lease gone
//!   stops leading (its fence closes) and, like anyone, may create it again at its next attempt.
//!   Its `leaseTransitions` count on from the Lease last seen (+ 1), where client-go starts again
//!   at 0; only a replica that never saw the Lease creates it with 0. A renewal keeps both and
//!   writes `renewTime`. "Now" is the wall clock (`SystemTime::now`) read at each write, as in
//!   client-go.
//! * The leader renews every RetryPeriod. Followers retry every RetryPeriod less up to a fifth at
//!   random (client-go draws *above* it, up to 2.2 × RetryPeriod; drawn below, a released Lease
//!   is taken within RetryPeriod), and also exactly when the observed Lease expires, so a crashed
//!   leader is replaced within LeaseDuration + RetryPeriod of its last renewal.
//! * On shutdown ([`LeaderElector::run`]'s future completing) the holder releases: empty holder,
//!   `leaseDurationSeconds: 1`, transitions unchanged. A release that meets a conflict (another
//!   writer's update since the last renewal, a label say) reads the Lease again and releases it
//!   if it is still this elector's (client-go gives up, and the Lease then has to expire).
//! * Defaults: LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s, and
//!   LeaseDuration > RenewDeadline > 1.2 × RetryPeriod is enforced, with LeaseDuration in whole
//!   seconds (what `leaseDurationSeconds` can say; client-go truncates it).
//!
//! # The fence
//!
//! [`LeaderElector::fence`] is `Some(`[`FencingToken`]`)` from the first successful write as
//! holder (of a Lease it did not create; see above) until RenewDeadline after the **sending** of
//! the last successful write, and `None` otherwise. Another candidate can take the Lease only
//! LeaseDuration after it first saw that write, which it cannot see before it was sent: so on
//! one clock the fence closes LeaseDuration − RenewDeadline (5 s by default) before anyone else
//! can lead. [`Controller::run_fenced`](crate::workqueue::Controller::run_fenced) (and the lower
//! [`WorkerPool::run_fenced`](crate::workqueue::WorkerPool::run_fenced)) cancels the reconciles
//! in flight when the fence closes and starts none until it opens again.
//!
//! **Process pauses.** The token itself knows that instant ([`FenceToken::holds`]), and fenced
//! workers ask it before every poll of a reconcile. After a pause longer than the Lease (SIGSTOP,
//! a paused VM, a long stop-the-world) every timer is due at once; a reconcile polled before the
//! elector has run to close the fence would take a step while another replica leads, and the
//! token's check stops it first. A reconcile can ask `token.holds()` itself before a step that
//! must not happen outside the leadership.
//!
//! **Clock-rate skew.** Replicas measure on their own clocks. If the leader's clock runs slower
//! than a follower's by a factor *r* (the leader sees RenewDeadline pass while the follower sees
//! *r* × RenewDeadline), the fence still closes first as long as *r* × RenewDeadline <
//! LeaseDuration: with the defaults, clock rates may differ by up to 50 %. (Clock *offsets* do
//! not matter to the election: no elector reads the times written in the Lease; the seeded
//! replica runs in `tests/replicas.rs` step them by up to ten minutes.) Less than that
//! margin remains for a cancelled reconcile to reach its next `.await`, where it is dropped: a
//! reconcile that blocks a thread is not stopped.
//!
//! **Wall-clock offsets.** They matter to whoever compares `renewTime` with its own clock, as
//! the timebertt sharder does with a [shard](crate::sharding)'s Lease: it reads the shard as
//! ready until `renewTime` + `leaseDurationSeconds` on its own clock and, once `renewTime` +
//! 2 × `leaseDurationSeconds` has passed, takes the Lease over and moves the shard's objects to
//! other shards. The shard's fence closes RenewDeadline after its last successful renewal was
//! sent, whose `renewTime` is its wall clock at that send: so a shard cut off from the server
//! has stopped before its objects move as long as its clock is behind the sharder's by less
//! than 2 × LeaseDuration − RenewDeadline (20 s with the defaults). Behind by more than
//! 2 × LeaseDuration − RetryPeriod (28 s), a shard loses its objects even while it renews and
//! works on them (its fence closes at its next renewal, which finds the Lease taken, up to
//! RetryPeriod later); a clock ahead delays the detection of a dead shard by as much. Keep the
//! machines' clocks synchronised (NTP) well within 20 s; the seeded shard runs in
//! `tests/replicas.rs` step each shard's clock within ±15 s. A step of the clock (NTP, a paused
//! VM, a suspend) shows in the next renewal, as the wall clock is read at each write.
//!
//! **Release only after the work has stopped.** A release lets another replica lead at its next
//! attempt (within RetryPeriod), without the LeaseDuration − RenewDeadline margin the fence
//! otherwise leaves: the fence closes as the release starts, but a reconcile is cancelled only at
//! its next `.await`, a blocking one not at all, and a write it already sent still lands. So
//! complete [`run`](LeaderElector::run)'s shutdown future only once the workers have returned
//! (`run_fenced` has returned), as the README's example does; dropping the `run` future instead
//! releases nothing, and the Lease expires after LeaseDuration.
//!
//! **What it cannot guarantee.** Kubernetes has no fencing on other objects: a write the old
//! leader sent before its fence closed can still reach the apiserver after the new leader has
//! started (a slow network, a retrying client). The [`FencingToken`] (holder and
//! `leaseTransitions`, which grows with every takeover) is what a reconcile can write into the
//! objects it changes (an annotation, say) so that a later reader or an admission webhook can
//! reject the stale writer; nothing in the apiserver does that by itself.
//!
//! # Tracing
//!
//! At info: became leader, released the Lease. At warn: a failed renewal while leading, the
//! Lease lost (renew deadline passed, or another holder seen), a failed release. At debug: the
//! error of each failed read, create or update. Each carries the Lease (`namespace/name`) and
//! this elector's identity, formatted only if a subscriber wants the event.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(client: informer::Client) -> informer::Result<()> {
//! use informer::leaderelection::{LeaderElectionConfig, LeaderElector, LeadershipEvent};
//!
//! let mut elector = LeaderElector::new(client, "default", "my-controller", "pod-a",
//!                                      LeaderElectionConfig::default())?;
//! let mut events = elector.events();
//! let fence = elector.fence(); // for Controller::run_fenced
//! tokio::spawn(elector.run(async { /* wait for SIGTERM */ }));
//! while let Some(event) = events.recv().await {
//!     match event {
//!         LeadershipEvent::StartedLeading(token) => println!("leading ({token})"),
//!         LeadershipEvent::StoppedLeading => println!("stopped leading"),
//!         LeadershipEvent::NewLeader { holder, .. } => println!("leader is now {holder:?}"),
//!     }
//! }
//! # Ok(()) }
//! ```

mod elector;
mod lease;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

pub use elector::LeaderElector;
pub use lease::{LeaseLock, LeaseSpec, StoredLease, format_micro_time, parse_micro_time};

use crate::error::{Error, Result};
use crate::workqueue::FenceToken;

/// client-go's jitter factor, which bounds RetryPeriod from above: RenewDeadline must exceed
/// 1.2 × RetryPeriod.
const JITTER_FACTOR: f64 = 1.2;

/// The three durations of an election.
///
/// ```
/// use std::time::Duration;
/// use informer::leaderelection::LeaderElectionConfig;
/// let config = LeaderElectionConfig::default();
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
/// assert!(config.validate().is_ok());
/// let bad = LeaderElectionConfig { renew_deadline: Duration::from_secs(20), ..config };
/// assert!(bad.validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// How long followers wait, from the last change they saw, before taking the Lease over.
    /// A whole number of seconds: it is written as `leaseDurationSeconds`, and
    /// [`validate`](Self::validate) refuses a fraction rather than truncate it. Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader goes on without a successful renewal before it stops leading (its
    /// fence closes). Default 10 s.
    pub renew_deadline: Duration,
    /// How often the leader renews and followers retry. Default 2 s.
    pub retry_period: Duration,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaderElectionConfig {
    /// Checks client-go's rules: LeaseDuration > RenewDeadline > 1.2 × RetryPeriod > 0, and
    /// LeaseDuration at least one second. Unlike client-go, which truncates LeaseDuration to the
    /// whole seconds it writes but checks the untruncated value (10.5 s passes against a
    /// RenewDeadline of 10 s, and followers wait 10 s), a LeaseDuration that is not a whole number
    /// of seconds (or does not fit `leaseDurationSeconds`, an `int32`) is refused: the duration
    /// checked is the one written.
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::leaderelection::LeaderElectionConfig;
    /// let tight = LeaderElectionConfig {
    ///     lease_duration: Duration::from_secs(3),
    ///     renew_deadline: Duration::from_secs(2),
    ///     retry_period: Duration::from_millis(1700),
    /// };
    /// assert!(tight.validate().is_err()); // 2 s is not more than 1.2 × 1.7 s
    /// ```
    pub fn validate(&self) -> Result<()> {
        let fail = |m: &str| Err(Error::Config(format!("leader election: {m}")));
        if self.retry_period.is_zero() {
            return fail("retryPeriod must be greater than zero");
        }
        if self.lease_duration.as_secs() == 0 {
            return fail("leaseDuration must be at least one second");
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return fail(&format!(
                "leaseDuration must be a whole number of seconds (it is written as \
                 leaseDurationSeconds), not {:?}",
                self.lease_duration
            ));
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return fail("leaseDuration does not fit leaseDurationSeconds (an int32)");
        }
        if self.lease_duration <= self.renew_deadline {
            return fail("leaseDuration must be greater than renewDeadline");
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return fail("renewDeadline must be greater than retryPeriod*JitterFactor");
        }
        Ok(())
    }
}

/// What a reconcile run under the fence receives: who leads and since which takeover.
///
/// `transitions` (the Lease's `leaseTransitions`) grows with every change of holder, so of two
/// tokens the one with more transitions is the newer leadership. That holds across a deletion of
/// the Lease as long as whoever creates it again had seen it (it counts on from the count it
/// saw); a replica started after the deletion, which never saw it, creates it with 0.
///
/// A token from an elector also knows until when it holds: RenewDeadline after the elector's
/// last successful renewal was sent, and never again once its fence closed
/// ([`holds`](FenceToken::holds)). Fenced workers ask before every poll of a reconcile, so a
/// reconcile stops at that instant even when the elector has not run yet to close the fence
/// (after a process pause, every timer is due at once). A reconcile may ask too, before a step
/// that must not happen outside the leadership. Two tokens are equal when their holder,
/// transitions and acquire time are: that window is not compared.
///
/// ```
/// use informer::leaderelection::FencingToken;
/// use informer::workqueue::FenceToken;
/// let token = FencingToken::new("pod-a", 3, "");
/// assert_eq!(token.to_string(), "pod-a/3");
/// assert!(token.holds()); // made by hand: it holds for ever
/// ```
#[derive(Clone, Debug)]
pub struct FencingToken {
    /// The holder's identity (this elector's).
    pub holder: String,
    /// The Lease's `leaseTransitions` when this leadership began.
    pub transitions: i32,
    /// The Lease's `acquireTime` of this leadership.
    pub acquire_time: String,
    /// Until when the leadership holds, shared by every clone and moved on by the elector.
    window: Arc<Mutex<Window>>,
}

/// Until when a [`FencingToken`] holds.
#[derive(Clone, Copy, Debug)]
enum Window {
    /// Made by hand: no elector bounds it.
    Unbounded,
    /// Until this instant (RenewDeadline after the last successful renewal was sent).
    Until(Instant),
    /// The fence closed: never again.
    Closed,
}

impl FencingToken {
    /// A token made by hand (a test, a fence of your own): it holds until the fence moves.
    ///
    /// ```
    /// use informer::leaderelection::FencingToken;
    /// let token = FencingToken::new("pod-a", 0, "2026-12-07T08:00:00.000000Z");
    /// assert_eq!(token.holder, "pod-a");
    /// ```
    pub fn new(
        holder: impl Into<String>,
        transitions: i32,
        acquire_time: impl Into<String>,
    ) -> Self {
        FencingToken {
            holder: holder.into(),
            transitions,
            acquire_time: acquire_time.into(),
            window: Arc::new(Mutex::new(Window::Unbounded)),
        }
    }

    /// Moves the end of the window to `until`, unless the token already stopped holding.
    pub(crate) fn hold_until(&self, until: Instant) {
        let mut window = lock(&self.window);
        if !matches!(*window, Window::Closed) {
            *window = Window::Until(until);
        }
    }

    /// The fence closed: the token never holds again.
    pub(crate) fn close(&self) {
        *lock(&self.window) = Window::Closed;
    }
}

/// The window's lock; a poisoned one is taken as is (a window is a plain value, always whole).
fn lock(window: &Mutex<Window>) -> std::sync::MutexGuard<'_, Window> {
    window
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FenceToken for FencingToken {
    fn holds(&self) -> bool {
        match *lock(&self.window) {
            Window::Unbounded => true,
            Window::Until(until) => Instant::now() < until,
            Window::Closed => false,
        }
    }
}

impl PartialEq for FencingToken {
    fn eq(&self, other: &Self) -> bool {
        self.holder == other.holder
            && self.transitions == other.transitions
            && self.acquire_time == other.acquire_time
    }
}

impl Eq for FencingToken {}

impl std::hash::Hash for FencingToken {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.holder, self.transitions, &self.acquire_time).hash(state);
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.holder, self.transitions)
    }
}

/// A change of leadership, as [`LeaderElector::events`] reports them (client-go's
/// `OnStartedLeading`, `OnStoppedLeading`, `OnNewLeader`).
///
/// ```
/// use informer::leaderelection::LeadershipEvent;
/// let event = LeadershipEvent::NewLeader { holder: "pod-b".into(), transitions: 4 };
/// assert!(matches!(event, LeadershipEvent::NewLeader { ref holder, .. } if holder == "pod-b"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeadershipEvent {
    /// This elector leads, with this token (its fence opened).
    StartedLeading(FencingToken),
    /// This elector stopped leading: a renewal did not succeed for RenewDeadline, another
    /// holder was found, or it released the Lease (its fence closed).
    StoppedLeading,
    /// The Lease's holder changed, as observed.
    NewLeader {
        /// The new holder; `""` when the Lease was released.
        holder: String,
        /// The Lease's `leaseTransitions` as observed with it.
        transitions: i32,
    },
}

#[cfg(test)]
mod tests {
    use super::LeaderElectionConfig;
    use std::time::Duration;

    /// The followers wait `leaseDurationSeconds`, whole seconds: a LeaseDuration of 10.9 s or
    /// 10.5 s would be written as 10 s, no more than a RenewDeadline of 10 s (two leaders for up
    /// to the difference), yet passed validation on the untruncated value. (#46)
    #[test]
    fn a_lease_duration_that_is_not_whole_seconds_is_refused() {
        for millis in [10_900, 10_500, 15_001] {
            let config = LeaderElectionConfig {
                lease_duration: Duration::from_millis(millis),
                ..LeaderElectionConfig::default()
            };
            let error = config
                .validate()
                .expect_err(&format!("{millis} ms"))
                .to_string();
            assert!(error.contains("whole number of seconds"), "{error}");
        }
        let written_as_negative = LeaderElectionConfig {
            lease_duration: Duration::from_secs(1 << 31),
            ..LeaderElectionConfig::default()
        };
        assert!(written_as_negative.validate().is_err());
        let whole = LeaderElectionConfig {
            lease_duration: Duration::from_secs(11),
            ..LeaderElectionConfig::default()
        };
        assert!(whole.validate().is_ok());
    }
}
