//! Leader election on the simulator's Leases, on a paused clock (issue #32): two and three
//! electors, takeover after a crash and after a release, the Lease's fields as client-go writes
//! them, and at most one leader at any instant across 1,000 seeded schedules of crashes,
//! releases, slow links and partitions.
//!
//! Each elector reaches the simulator through a relay of its own, which can delay every chunk
//! (a request may then reach the server after the elector gave up on it), swallow everything
//! (a silent partition) or refuse (a partition that resets). Leadership is read from each
//! elector's fence, the signal its workers obey: the log records when each fence opened and
//! closed, and no two may be open at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use informer::leaderelection::{
    FencingToken, LeaderElectionConfig, LeaderElector, LeadershipEvent, parse_micro_time,
};
use informer::{Client, Config};
use informer_sim::Simulator;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

#[path = "support/mod.rs"]
mod support;
use support::relay::{Link, Relay};

const NS: &str = "default";

/// How long the first elector of a new Lease takes to lead: it creates the Lease at once and
/// opens its fence at its first renewal from LeaseDuration on (a missing Lease may have been
/// deleted under a holder that does not know it yet).
const FIRST_LEAD: Duration = Duration::from_secs(15 + 2 + 1);

fn client(url: &str) -> Client {
    Client::new(Config::new(url.parse().unwrap())).unwrap()
}

/// When each elector's fence opened (`true`) and closed (`false`), in order.
type Log = Arc<Mutex<Vec<(Instant, String, bool)>>>;

/// Records `fence`'s openings and closings; a dropped elector (a crash) closes it.
fn record(identity: &str, mut fence: watch::Receiver<Option<FencingToken>>, log: &Log) {
    let (identity, log) = (identity.to_string(), log.clone());
    tokio::spawn(async move {
        let mut leading = false;
        loop {
            let now = fence.borrow_and_update().is_some();
            if now != leading {
                leading = now;
                log.lock()
                    .unwrap()
                    .push((Instant::now(), identity.clone(), leading));
            }
            if fence.changed().await.is_err() {
                if leading {
                    log.lock()
                        .unwrap()
                        .push((Instant::now(), identity.clone(), false));
                }
                return;
            }
        }
    });
}

/// Fails if two fences were ever open at once; returns how many leaderships there were.
fn assert_one_leader_at_a_time(log: &Log, context: &str) -> usize {
    let log = log.lock().unwrap();
    let mut leader: Option<&str> = None;
    let mut terms = 0;
    for (at, who, leading) in log.iter() {
        if *leading {
            assert!(
                leader.is_none(),
                "{context}: {who} started leading at {at:?} while {leader:?} led; log: {log:#?}"
            );
            leader = Some(who);
            terms += 1;
        } else {
            assert_eq!(leader, Some(who.as_str()), "{context}: log {log:#?}");
            leader = None;
        }
    }
    terms
}

/// A running elector: its task, its shutdown switch (release) and its fence.
struct Running {
    task: JoinHandle<()>,
    release: Option<oneshot::Sender<()>>,
    fence: watch::Receiver<Option<FencingToken>>,
}

impl Running {
    fn leads(&self) -> bool {
        self.fence.borrow().is_some()
    }

    /// Completes the shutdown future: the elector releases the Lease and returns.
    async fn release(mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap();
    }

    fn crash(self) {
        self.task.abort();
    }
}

fn start(url: &str, lease: &str, identity: &str, seed: u64, log: &Log) -> Running {
    let elector = LeaderElector::new(
        client(url),
        NS,
        lease,
        identity,
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .jitter_seed(seed);
    let fence = elector.fence();
    record(identity, elector.fence(), log);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(elector.run(async {
        let _ = rx.await;
    }));
    Running {
        task,
        release: Some(tx),
        fence,
    }
}

/// Waits (in virtual time) until `pred` holds, checking every 10 ms; panics after `limit`.
async fn until(limit: Duration, what: &str, mut pred: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !pred() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

fn lease(sim: &Simulator, name: &str) -> Value {
    sim.get("leases", Some(NS), name).unwrap()
}

/// A wall clock for [`LeaderElector::wall_clock`] that moves with the (paused) runtime clock,
/// from the real time when it was made.
fn runtime_wall_clock() -> impl Fn() -> SystemTime + Send + Sync + 'static {
    let (base, anchor) = (SystemTime::now(), Instant::now());
    move || base + anchor.elapsed()
}

#[tokio::test(start_paused = true)]
async fn two_electors_one_leads_a_crashed_leader_is_replaced_within_lease_duration_plus_retry() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "crash", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    let b = start(sim.url(), "crash", "b", 2, &log);
    sleep(Duration::from_secs(30)).await;
    assert!(a.leads() && !b.leads(), "the first leader keeps the Lease");

    let created = lease(&sim, "crash");
    assert_eq!(created["spec"]["holderIdentity"], "a");
    assert_eq!(created["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(created["spec"]["leaseTransitions"], 0);

    a.crash();
    let took = until(Duration::from_secs(30), "b takes over", || b.leads()).await;
    let bound = Duration::from_secs(15 + 2);
    assert!(
        took <= bound,
        "takeover after {took:?}, more than {bound:?}"
    );
    assert!(
        took >= Duration::from_secs(15) - Duration::from_secs(2),
        "{took:?}: too early"
    );
    let taken = lease(&sim, "crash");
    assert_eq!(taken["spec"]["holderIdentity"], "b");
    assert_eq!(taken["spec"]["leaseTransitions"], 1);
    assert_ne!(taken["spec"]["acquireTime"], created["spec"]["acquireTime"]);
    assert_eq!(assert_one_leader_at_a_time(&log, "crash"), 2);
    b.release().await;
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_within_retry_period_and_fields_are_client_gos() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    // renewTime is the wall clock at each write; this one moves with the paused clock.
    let mut a_elector = LeaderElector::new(
        client(sim.url()),
        NS,
        "release",
        "a",
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .wall_clock(runtime_wall_clock());
    let mut a_events = a_elector.events();
    record("a", a_elector.fence(), &log);
    let a_fence = a_elector.fence();
    let (stop_a, stopped) = oneshot::channel::<()>();
    let a_task = tokio::spawn(a_elector.run(async {
        let _ = stopped.await;
    }));
    until(FIRST_LEAD, "a leads", || a_fence.borrow().is_some()).await;
    let b = start(sim.url(), "release", "b", 3, &log);

    // Renewals every RetryPeriod: renewTime moves, acquireTime and transitions do not.
    sleep(Duration::from_millis(500)).await;
    let first = lease(&sim, "release");
    sleep(Duration::from_secs(4)).await;
    let later = lease(&sim, "release");
    assert_eq!(later["spec"]["acquireTime"], first["spec"]["acquireTime"]);
    assert_eq!(later["spec"]["leaseTransitions"], 0);
    let renewed = |v: &Value| parse_micro_time(v["spec"]["renewTime"].as_str().unwrap()).unwrap();
    let step = renewed(&later).duration_since(renewed(&first)).unwrap();
    assert_eq!(step, Duration::from_secs(4), "two renewals, 2 s apart");
    let micro = later["spec"]["renewTime"].as_str().unwrap();
    assert_eq!(micro.len(), "2026-12-04T21:00:00.123456Z".len(), "{micro}");

    // Release: empty holder, a one second duration, transitions unchanged.
    stop_a.send(()).unwrap();
    let released_at = Instant::now();
    a_task.await.unwrap();
    assert!(a_fence.borrow().is_none());
    let took = until(Duration::from_secs(5), "b takes over", || b.leads()).await;
    let took = took.max(released_at.elapsed());
    assert!(
        took <= Duration::from_secs(2),
        "takeover {took:?} after the release"
    );
    let taken = lease(&sim, "release");
    assert_eq!(taken["spec"]["holderIdentity"], "b");
    assert_eq!(taken["spec"]["leaseTransitions"], 1);

    let mut events = Vec::new();
    while let Ok(event) = a_events.try_recv() {
        events.push(event);
    }
    assert!(
        // client-go's order: the new leader is reported before OnStartedLeading.
        matches!(events.as_slice(), [
            LeadershipEvent::NewLeader { holder: first, transitions: 0 },
            LeadershipEvent::StartedLeading(token),
            LeadershipEvent::StoppedLeading,
            LeadershipEvent::NewLeader { holder: released, transitions: 0 },
        ] if token.holder == "a" && token.transitions == 0 && first == "a" && released.is_empty()),
        "{events:?}"
    );
    assert_eq!(assert_one_leader_at_a_time(&log, "release"), 2);
    b.release().await;
    let released = lease(&sim, "release");
    assert_eq!(released["spec"]["holderIdentity"], "");
    assert_eq!(released["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(released["spec"]["leaseTransitions"], 1);
}

#[tokio::test(start_paused = true)]
async fn three_electors_exactly_one_leads_and_a_partitioned_leader_stops_before_lease_duration() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let mut relays = Vec::new();
    let mut electors = Vec::new();
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        let relay = Relay::start(sim.addr()).await;
        electors.push(start(&relay.url(), "three", id, i as u64, &log));
        relays.push(relay);
    }
    sleep(Duration::from_secs(20)).await;
    let leaders: Vec<usize> = (0..3).filter(|&i| electors[i].leads()).collect();
    assert_eq!(leaders.len(), 1, "{leaders:?}");
    let leader = leaders[0];

    // The leader can no longer reach the server: its fence closes within RenewDeadline of its
    // last renewal (so before LeaseDuration), and another takes over after LeaseDuration.
    relays[leader].set(Link::Blackhole);
    let cut = Instant::now();
    let closed = until(Duration::from_secs(15), "the cut-off leader stops", || {
        !electors[leader].leads()
    })
    .await;
    assert!(
        closed <= Duration::from_secs(10),
        "stopped after {closed:?}"
    );
    until(Duration::from_secs(20), "another leads", || {
        (0..3).any(|i| i != leader && electors[i].leads())
    })
    .await;
    let new_leader_after = cut.elapsed();
    assert!(
        new_leader_after <= Duration::from_secs(17),
        "{new_leader_after:?}"
    );
    assert!(new_leader_after > closed);

    // Healed, the old leader follows.
    relays[leader].set(Link::Up);
    sleep(Duration::from_secs(30)).await;
    assert_eq!((0..3).filter(|&i| electors[i].leads()).count(), 1);
    assert!(!electors[leader].leads());
    assert_eq!(assert_one_leader_at_a_time(&log, "three"), 2);
}

/// One seeded schedule: 2 or 3 electors for 80 s of crashes, releases, restarts, slow links
/// and partitions, then everything healed and running for 30 s.
async fn schedule(sim: &Simulator, seed: u64) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let lease = format!("schedule-{seed}");
    let log: Log = Arc::default();
    let n = rng.usize(2..=3);
    let mut relays = Vec::new();
    for _ in 0..n {
        relays.push(Relay::start(sim.addr()).await);
    }
    let ids: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
    let mut electors: Vec<Option<Running>> = (0..n)
        .map(|i| {
            Some(start(
                &relays[i].url(),
                &lease,
                &ids[i],
                seed * 8 + i as u64,
                &log,
            ))
        })
        .collect();
    let chaos_end = Instant::now() + Duration::from_secs(80);
    while Instant::now() < chaos_end {
        sleep(Duration::from_millis(rng.u64(200..4000))).await;
        let i = rng.usize(0..n);
        match rng.u32(0..10) {
            0 => {
                if let Some(e) = electors[i].take() {
                    e.crash();
                }
            }
            1 => {
                if let Some(e) = electors[i].take() {
                    e.release().await;
                }
            }
            2 | 3 => {
                if electors[i].is_none() {
                    electors[i] = Some(start(&relays[i].url(), &lease, &ids[i], rng.u64(..), &log));
                }
            }
            4 => relays[i].set(Link::Blackhole),
            5 => relays[i].set(Link::Refuse),
            6 | 7 => relays[i].set(Link::Delay(Duration::from_millis(rng.u64(1..12_000)))),
            _ => relays[i].set(Link::Up),
        }
    }
    for i in 0..n {
        relays[i].set(Link::Up);
        if electors[i].is_none() {
            electors[i] = Some(start(&relays[i].url(), &lease, &ids[i], rng.u64(..), &log));
        }
    }
    // Healed: someone leads within LeaseDuration + RenewDeadline + RetryPeriod at most (a stale
    // request may hold an elector for RenewDeadline).
    sleep(Duration::from_secs(30)).await;
    let leading = electors.iter().flatten().filter(|e| e.leads()).count();
    assert_eq!(leading, 1, "seed {seed}: {leading} leaders after healing");
    for e in electors.into_iter().flatten() {
        e.crash();
    }
    tokio::task::yield_now().await;
    assert_one_leader_at_a_time(&log, &format!("seed {seed}"))
}

#[tokio::test(start_paused = true)]
async fn at_most_one_leader_at_any_instant_across_1000_seeded_schedules() {
    let sim = Simulator::start().await.unwrap();
    let schedules: u64 = std::env::var("LEADER_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let mut terms = 0;
    for seed in 0..schedules {
        terms += schedule(&sim, seed).await;
    }
    // Not vacuous: crashes, releases and partitions moved the Lease about three times a schedule.
    assert!(
        terms as u64 >= 2 * schedules,
        "{terms} leaderships in {schedules} schedules"
    );
    eprintln!("{terms} leaderships in {schedules} schedules");
}

/// What the replicas' reconciles did: (when, replica, key, leaseTransitions, what).
type Work = Arc<Mutex<Vec<(Instant, String, String, i32, &'static str)>>>;

/// Marks a reconcile's end in the log: `"cancelled"` unless it finished.
struct Ended {
    work: Work,
    entry: (String, String, i32),
    finished: bool,
}

impl Drop for Ended {
    fn drop(&mut self) {
        let (replica, key, term) = self.entry.clone();
        let what = if self.finished {
            "finished"
        } else {
            "cancelled"
        };
        self.work
            .lock()
            .unwrap()
            .push((Instant::now(), replica, key, term, what));
    }
}

/// One replica: an elector through `relay`, and a Controller on ConfigMaps (straight
/// to the simulator) run under its fence. A ConfigMap named `stuck-*` never finishes its
/// reconcile.
fn replica(
    sim: &Simulator,
    relay: &Relay,
    identity: &str,
    work: &Work,
) -> (JoinHandle<()>, watch::Receiver<Option<FencingToken>>) {
    use informer::workqueue::{Action, Controller, ObjectRef};
    use informer::{ConfigMap, InformerFactory};
    let elector = LeaderElector::new(
        client(&relay.url()),
        NS,
        "controller",
        identity,
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .jitter_seed(identity.len() as u64);
    let fence = elector.fence();
    let leads = elector.fence();
    let factory = InformerFactory::new(client(sim.url()));
    let controller = Controller::new(&factory.informer::<ConfigMap>(Some(NS)), 2);
    factory.start();
    let (identity, work) = (identity.to_string(), work.clone());
    let task = tokio::spawn(async move {
        tokio::spawn(elector.run(std::future::pending()));
        controller
            .run_fenced(
                fence,
                move |cm: Arc<ConfigMap>, _ctx: Arc<()>, token: FencingToken| {
                    let (identity, work) = (identity.clone(), work.clone());
                    async move {
                        let key = ObjectRef::from_obj(&*cm).to_string();
                        let entry = (identity, key.clone(), token.transitions);
                        work.lock().unwrap().push((
                            Instant::now(),
                            entry.0.clone(),
                            key.clone(),
                            token.transitions,
                            "started",
                        ));
                        let mut ended = Ended {
                            work,
                            entry,
                            finished: false,
                        };
                        if key.contains("stuck-") {
                            std::future::pending::<()>().await;
                        }
                        sleep(Duration::from_millis(100)).await;
                        ended.finished = true;
                        Ok::<_, String>(Action::Done)
                    }
                },
                Arc::new(()),
                std::future::pending(),
            )
            .await;
    });
    (task, leads)
}

#[tokio::test(start_paused = true)]
async fn a_fenced_controller_reconciles_only_while_leading_and_a_cut_off_leader_cancels_in_time() {
    let sim = Simulator::start().await.unwrap();
    for name in ["stuck-1", "web", "db"] {
        sim.create(
            "configmaps",
            Some(NS),
            serde_json::json!({"metadata": {"name": name}}),
        )
        .unwrap();
    }
    let work: Work = Arc::default();
    let relay_a = Relay::start(sim.addr()).await;
    let (a, _) = replica(&sim, &relay_a, "a", &work);
    sleep(Duration::from_secs(3)).await;
    let relay_b = Relay::start(sim.addr()).await;
    let (b, b_leads) = replica(&sim, &relay_b, "b", &work);
    // The informers hand events to handler threads, which a paused clock does not wait for:
    // wait in real time for the leader's first reconciles.
    let real = std::time::Instant::now();
    while work
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.4 == "finished")
        .count()
        < 2
    {
        assert!(real.elapsed() < Duration::from_secs(20), "no reconciles");
        sleep(Duration::from_millis(10)).await;
    }
    sleep(Duration::from_secs(5)).await;
    {
        let work = work.lock().unwrap();
        assert!(work.iter().all(|w| w.1 == "a" && w.3 == 0), "{work:#?}");
        let done: Vec<_> = work.iter().filter(|w| w.4 == "finished").collect();
        assert_eq!(
            done.len(),
            2,
            "web and db reconciled by the leader: {work:#?}"
        );
    }

    // a can no longer renew: its stuck reconcile is cancelled within RenewDeadline of its last
    // renewal (before anyone can take the Lease); b then takes over and, once its informer has
    // relisted (the controller's catch-up when a fence opens), reconciles the stuck key again
    // with the next token.
    relay_a.set(Link::Blackhole);
    let cut = Instant::now();
    let b_led_after = until(Duration::from_secs(30), "b leads", || {
        b_leads.borrow().is_some()
    })
    .await;
    assert!(
        b_led_after <= Duration::from_secs(17),
        "b led {b_led_after:?} after the cut"
    );
    // The catch-up's list goes through the informer's threads, which the paused clock does not
    // wait for: wait for b's first reconcile in real time.
    let real = std::time::Instant::now();
    while !work.lock().unwrap().iter().any(|w| w.1 == "b") {
        assert!(
            real.elapsed() < Duration::from_secs(20),
            "b never reconciled"
        );
        sleep(Duration::from_millis(10)).await;
    }
    let work = work.lock().unwrap().clone();
    let cancelled = work
        .iter()
        .find(|w| w.1 == "a" && w.4 == "cancelled")
        .expect("a's stuck reconcile was cancelled");
    assert_eq!(cancelled.2, "default/stuck-1");
    let cancelled_after = cancelled.0 - cut;
    assert!(
        cancelled_after <= Duration::from_secs(10),
        "cancelled {cancelled_after:?} after the cut"
    );
    let b_start = work.iter().find(|w| w.1 == "b").unwrap();
    assert_eq!(b_start.3, 1, "b reconciles under the next leaseTransitions");
    assert!(
        b_start.0 - cancelled.0 >= Duration::from_secs(5) - Duration::from_millis(1),
        "LeaseDuration - RenewDeadline between a's cancel and b's first reconcile: {work:#?}"
    );
    a.abort();
    b.abort();
}

/// `acquireTime` and `renewTime` are the wall clock read at each write, as client-go writes them:
/// after the clock is stepped (NTP, a VM pause, a suspend), the next renewal writes the stepped
/// time, on which readers comparing `renewTime` with their own clock (the timebertt sharder)
/// rely. Before, they were the wall clock read once at start plus the monotonic time since. (#46)
#[tokio::test(start_paused = true)]
async fn renew_time_is_the_wall_clock_at_each_write_even_after_it_is_stepped() {
    let sim = Simulator::start().await.unwrap();
    let wall = Arc::new(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000),
    ));
    let read = wall.clone();
    let elector = LeaderElector::new(
        client(sim.url()),
        NS,
        "stepped",
        "a",
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .wall_clock(move || *read.lock().unwrap());
    let fence = elector.fence();
    let task = tokio::spawn(elector.run(std::future::pending()));
    until(FIRST_LEAD, "a leads", || fence.borrow().is_some()).await;
    let written = |field: &str| {
        parse_micro_time(lease(&sim, "stepped")["spec"][field].as_str().unwrap()).unwrap()
    };
    let acquired = *wall.lock().unwrap();
    assert_eq!(written("acquireTime"), acquired);

    let hour = Duration::from_secs(3600);
    // Forward, back past the first write, forward by a day.
    for stepped in [acquired + hour, acquired - hour, acquired + 25 * hour] {
        *wall.lock().unwrap() = stepped;
        sleep(Duration::from_secs(3)).await; // a renewal or two (RetryPeriod 2 s)
        // The clock stands still between steps: a second renewal adds a microsecond.
        let renewed = written("renewTime");
        let after = renewed
            .duration_since(stepped)
            .unwrap_or_else(|_| panic!("renewTime {renewed:?} before the clock {stepped:?}"));
        assert!(
            after < Duration::from_millis(1),
            "renewTime {renewed:?}, the clock {stepped:?}"
        );
    }
    assert_eq!(
        written("acquireTime"),
        acquired,
        "renewals keep acquireTime"
    );
    assert!(
        fence.borrow().is_some(),
        "a stepped wall clock does not affect leading"
    );
    task.abort();
}

/// A release whose update meets a conflict (someone else wrote the Lease since the last renewal,
/// here a label) reads the Lease again and, as this elector still holds it, releases it with the
/// fresh resourceVersion. Before, the Lease stayed held until it expired: a failover after
/// LeaseDuration + RetryPeriod instead of RetryPeriod. (#46)
#[tokio::test(start_paused = true)]
async fn a_release_that_meets_a_conflict_reads_the_lease_again_and_releases_it() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "conflict", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    sleep(Duration::from_millis(500)).await; // between two renewals
    let label = serde_json::json!({"metadata": {"labels": {"team": "web"}}});
    sim.patch("leases", Some(NS), "conflict", &label).unwrap();
    a.release().await;
    let released = lease(&sim, "conflict");
    assert_eq!(released["spec"]["holderIdentity"], "", "{released}");
    assert_eq!(released["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(released["spec"]["leaseTransitions"], 0);
    assert_eq!(
        released["metadata"]["labels"]["team"], "web",
        "the other write is kept"
    );
}

/// A release that finds the Lease held by someone else since (its update a conflict) leaves it
/// alone. (#46)
#[tokio::test(start_paused = true)]
async fn a_release_leaves_a_lease_another_holder_took_meanwhile() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "taken", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    sleep(Duration::from_millis(500)).await;
    let taken = serde_json::json!({"spec": {"holderIdentity": "b", "leaseTransitions": 1}});
    sim.patch("leases", Some(NS), "taken", &taken).unwrap();
    a.release().await;
    let after = lease(&sim, "taken");
    assert_eq!(after["spec"]["holderIdentity"], "b", "{after}");
    assert_eq!(after["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(after["spec"]["leaseTransitions"], 1);
}

/// The fence's token, if open.
fn token(running: &Running) -> Option<FencingToken> {
    running.fence.borrow().clone()
}

/// A leader whose Lease was deleted finds it gone at its next renewal and closes its fence (it
/// leads no more); whoever creates it again counts `leaseTransitions` on from the deleted
/// Lease's, so the newer leadership has the larger token. Before, the leader created it again
/// with `leaseTransitions: 0` and kept its fence open with the old token. (#46)
#[tokio::test(start_paused = true)]
async fn a_deleted_lease_closes_the_leaders_fence_and_comes_back_with_more_transitions() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "deleted", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    let b = start(sim.url(), "deleted", "b", 2, &log);
    sleep(Duration::from_secs(5)).await;
    assert_eq!(token(&a).unwrap().transitions, 0);

    sim.delete("leases", Some(NS), "deleted").unwrap();
    let closed = until(Duration::from_secs(5), "a's fence closes", || !a.leads()).await;
    assert!(closed <= Duration::from_secs(2), "closed {closed:?} after");
    until(Duration::from_secs(20), "someone leads again", || {
        a.leads() || b.leads()
    })
    .await;
    let again = lease(&sim, "deleted");
    let leader = token(&a).or_else(|| token(&b)).unwrap();
    assert_eq!(again["spec"]["holderIdentity"], leader.holder.as_str());
    assert_eq!(again["spec"]["leaseTransitions"], 1, "{again}");
    assert_eq!(leader.transitions, 1);
    assert_eq!(assert_one_leader_at_a_time(&log, "deleted"), 2);
}

/// A follower that finds the Lease deleted does not lead on it at once: the leader, cut off, may
/// still have its fence open (for RenewDeadline after its last renewal), so whoever creates the
/// Lease again opens its fence at its first renewal from LeaseDuration after the creation.
/// Before, the follower created it at its next attempt and both fences were open. (#46)
#[tokio::test(start_paused = true)]
async fn a_follower_does_not_lead_on_a_deleted_lease_while_the_old_leaders_fence_may_be_open() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let relay = Relay::start(sim.addr()).await;
    let a = start(&relay.url(), "deleted-cut", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    let b = start(sim.url(), "deleted-cut", "b", 2, &log);
    sleep(Duration::from_secs(5)).await;

    relay.set(Link::Blackhole);
    sim.delete("leases", Some(NS), "deleted-cut").unwrap();
    let deleted = Instant::now();
    until(Duration::from_secs(30), "b leads", || b.leads()).await;
    assert!(!a.leads());
    assert!(
        deleted.elapsed() >= Duration::from_secs(15),
        "b led {:?} after the deletion",
        deleted.elapsed()
    );
    let again = lease(&sim, "deleted-cut");
    assert_eq!(again["spec"]["holderIdentity"], "b");
    assert_eq!(again["spec"]["leaseTransitions"], 1, "{again}");
    assert_eq!(assert_one_leader_at_a_time(&log, "deleted-cut"), 2);
}

/// A replica started after the Lease was deleted, which never saw it, cannot tell a deletion
/// under a cut-off holder from a first start: it creates the Lease, and opens its fence only
/// LeaseDuration later, by when the old holder's fence has closed. Before, it led at once beside
/// the old leader (found by the seeded replica runs, `tests/replicas.rs`). (#46)
#[tokio::test(start_paused = true)]
async fn a_replica_started_after_a_deletion_does_not_lead_while_the_old_leaders_fence_may_be_open()
{
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let relay = Relay::start(sim.addr()).await;
    let a = start(&relay.url(), "deleted-new", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;

    relay.set(Link::Blackhole);
    sim.delete("leases", Some(NS), "deleted-new").unwrap();
    let deleted = Instant::now();
    let c = start(sim.url(), "deleted-new", "c", 3, &log);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        lease(&sim, "deleted-new")["spec"]["holderIdentity"],
        "c",
        "c creates the Lease at once"
    );
    assert!(a.leads() && !c.leads(), "a's fence may still be open");
    until(Duration::from_secs(30), "c leads", || c.leads()).await;
    assert!(
        deleted.elapsed() >= Duration::from_secs(15),
        "c led {:?} after the deletion",
        deleted.elapsed()
    );
    assert!(!a.leads());
    assert_eq!(assert_one_leader_at_a_time(&log, "deleted-new"), 2);
}

/// A Lease found held by this elector's own identity, which it did not know it held: the
/// create or takeover of an attempt whose answer never came back (it may land after the attempt
/// was given up), or an earlier process with the same identity, perhaps still running, cut off.
/// It cannot tell when that write landed, so it waits as for a Lease it created: its fence opens
/// LeaseDuration after it learned of the Lease. Before, it renewed "its" Lease and led at once.
/// (#46, found in review)
#[tokio::test(start_paused = true)]
async fn a_lease_found_held_by_this_identity_unawares_opens_its_fence_late() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let now = informer::leaderelection::format_micro_time(SystemTime::now());
    sim.create(
        "leases",
        Some(NS),
        serde_json::json!({"metadata": {"name": "unawares"},
               "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                        "acquireTime": now, "renewTime": now, "leaseTransitions": 3}}),
    )
    .unwrap();
    let started = Instant::now();
    let a = start(sim.url(), "unawares", "a", 1, &log);
    until(Duration::from_secs(60), "a leads", || a.leads()).await;
    let led = started.elapsed();
    assert!(
        led >= Duration::from_secs(15),
        "led {led:?} after finding the Lease held by its identity"
    );
    assert_eq!(
        token(&a).unwrap().transitions,
        3,
        "the same leadership, renewed"
    );
    assert_eq!(assert_one_leader_at_a_time(&log, "unawares"), 1);
}

/// A leader that finds its Lease emptied under it (an empty holder written by someone else) takes
/// it again with `leaseTransitions` + 1, and its fence carries the new token. Before, the fence
/// kept the old one, fewer transitions than the Lease said. (#46)
#[tokio::test(start_paused = true)]
async fn a_leader_that_takes_its_lease_again_opens_its_fence_with_the_new_token() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "emptied", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    sleep(Duration::from_millis(500)).await;
    let emptied = serde_json::json!({"spec": {"holderIdentity": ""}});
    sim.patch("leases", Some(NS), "emptied", &emptied).unwrap();
    sleep(Duration::from_secs(3)).await; // the next renewal
    let again = lease(&sim, "emptied");
    assert_eq!(again["spec"]["holderIdentity"], "a");
    assert_eq!(again["spec"]["leaseTransitions"], 1);
    assert_eq!(token(&a).map(|t| t.transitions), Some(1));
}

/// A stream of events that is taken but not read holds at most `EVENTS_CAPACITY` (64) of them (later ones are
/// dropped, with a warning); the election goes on. Before, it grew without bound. (#46)
#[tokio::test(start_paused = true)]
async fn events_nobody_reads_are_bounded() {
    let sim = Simulator::start().await.unwrap();
    let held = |holder: &str| {
        serde_json::json!({"metadata": {"name": "flapping"},
                           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
    };
    sim.create("leases", Some(NS), held("x0")).unwrap();
    let mut elector = LeaderElector::new(
        client(sim.url()),
        NS,
        "flapping",
        "a",
        LeaderElectionConfig::default(),
    )
    .unwrap();
    let mut events = elector.events();
    let task = tokio::spawn(elector.run(std::future::pending()));
    // A new holder every 2.5 s, each seen by the follower's next attempt: 100 events.
    for i in 1..=100 {
        sleep(Duration::from_millis(2500)).await;
        let patch = serde_json::json!({"spec": {"holderIdentity": format!("x{i}")}});
        sim.patch("leases", Some(NS), "flapping", &patch).unwrap();
    }
    sleep(Duration::from_millis(2500)).await;
    let mut kept = Vec::new();
    while let Ok(event) = events.try_recv() {
        kept.push(event);
    }
    assert_eq!(
        kept.len(),
        LeaderElector::EVENTS_CAPACITY,
        "{} kept",
        kept.len()
    );
    assert_eq!(
        kept[0],
        LeadershipEvent::NewLeader {
            holder: "x0".into(),
            transitions: 0
        }
    );
    assert!(!task.is_finished(), "the election goes on");
    task.abort();
}

/// An elector dropped while leading (its task aborted, as a crash of the task would) closes its
/// fence: the fence reads `None`, not the last token the closed channel keeps. (#46)
#[tokio::test(start_paused = true)]
async fn an_elector_dropped_while_leading_closes_its_fence() {
    let sim = Simulator::start().await.unwrap();
    let log: Log = Arc::default();
    let a = start(sim.url(), "dropped", "a", 1, &log);
    until(FIRST_LEAD, "a leads", || a.leads()).await;
    let mut fence = a.fence.clone();
    a.crash();
    // The abort takes effect when the task is next polled.
    until(Duration::from_secs(1), "the fence closes", || {
        fence.borrow_and_update().is_none()
    })
    .await;
    assert!(fence.has_changed().is_err(), "the sender is gone");
    assert!(fence.borrow().is_none());
}

/// Workers under a fence whose sender is gone while it holds a token start no reconcile: a
/// closed fence means stopped, whatever its last value. Before, each worker started the
/// reconcile, saw the fence "move" (a closed channel), cancelled it, queued the key again, and
/// went round in a hot loop. (#46)
#[tokio::test]
async fn workers_under_a_fence_whose_sender_is_gone_start_nothing() {
    use informer::workqueue::{Action, WorkQueue, WorkerPool};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let queue: WorkQueue<String> = WorkQueue::new();
    queue.add("a".to_owned());
    queue.add("b".to_owned());
    let (sender, fence) = watch::channel(Some(1u64));
    drop(sender);
    let started = Arc::new(AtomicUsize::new(0));
    let counted = started.clone();
    let summary = WorkerPool::new(queue, 2)
        .run_fenced(
            fence,
            move |_key: String, _token: u64| {
                counted.fetch_add(1, Ordering::Relaxed);
                async {
                    std::future::pending::<()>().await;
                    Ok::<_, String>(Action::Done)
                }
            },
            sleep(Duration::from_millis(200)),
        )
        .await;
    assert_eq!(started.load(Ordering::Relaxed), 0, "{summary:?}");
    assert_eq!(summary.fenced, 0, "{summary:?}");
}
