//! Seeded runs of a controller's replicas (issue #46), in two settings:
//!
//! * **Leader election**: two or three replicas of one `Controller`, each under the fence of its
//!   own `LeaderElector`, reconcile the same ConfigMaps for two minutes of crashes, restarts,
//!   releases, partitions, slow links, process pauses longer than the Lease, wall-clock steps
//!   and deletions of the Lease, then heal.
//! * **Sharding**: two or three shards of a timebertt ring (`informer::sharding::Shard`), each
//!   watching only its objects, under a sharder the test plays (it assigns objects to ready
//!   shards, moves those of dead shards and drains others), through the same faults but Lease
//!   deletions (the sharder's business) and with clock offsets kept within what the sharding
//!   docs require (±15 s of the sharder's).
//!
//! The invariant, checked over at least 1,000 seeded schedules of each (`REPLICA_SCHEDULES` to
//! change it): **no key is reconciled by two replicas at overlapping times**.
//!
//! The simulator, the relays and every replica share one runtime on a paused clock, so the
//! schedules run in virtual time. Each replica reaches the simulator through a relay of its own
//! (its elector and its informer alike), so a partition cuts the whole replica off. What they
//! found, each fixed with a test of its own: a replica paused past its Lease took a step on
//! resuming (fence tokens now lapse by themselves), a replica started after a Lease deletion led
//! beside the cut-off holder (a created Lease now opens its fence LeaseDuration later), and a
//! shard whose watch broke after its first list reconciled an object the sharder had moved (a
//! fence's opening now waits for lists started after it).
//!
//! A process pause (SIGSTOP, a VM paused, a stop-the-world) is played by a switch each replica
//! holds: while it is on, neither the replica's elector nor any of its reconciles is polled;
//! their timers run out meanwhile, and when the switch goes off every one of them is due at
//! once, in whatever order the runtime polls them, as after a real pause. (The replica's
//! informer, on threads of its own, keeps running: its cache is only fresher for it.)
//!
//! A reconcile is active from its first poll to its last: that is when it runs. A reconcile
//! cancelled while it waits (a cut-off leader's fence closing) is not running after its last
//! poll; one of a paused replica is not running during the pause. Two replicas' active spans of
//! one key must never overlap.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use informer::leaderelection::{FencingToken, LeaderElectionConfig, LeaderElector};
use informer::workqueue::{Action, Controller, ObjectRef};
use informer::{Client, Config, ConfigMap, InformerFactory};
use informer_sim::Simulator;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

#[path = "support/mod.rs"]
mod support;
use support::relay::{Link, Relay};

const LEASE: &str = "controller";
const KEYS: usize = 3;

/// A process-pause switch: futures wrapped by [`Pause::wrap`] are not polled while it is on.
#[derive(Clone, Default)]
struct Pause(Arc<PauseState>);

#[derive(Default)]
struct PauseState {
    on: AtomicBool,
    /// Futures that were due while paused, woken when the pause ends.
    parked: Mutex<Vec<Waker>>,
}

impl Pause {
    fn set(&self, on: bool) {
        // Under the lock that `Paused::poll` takes to check and park: no wake-up is lost.
        let mut parked = self.0.parked.lock().unwrap();
        self.0.on.store(on, Ordering::SeqCst);
        if !on {
            parked.drain(..).for_each(Waker::wake);
        }
    }

    fn is_on(&self) -> bool {
        self.0.on.load(Ordering::SeqCst)
    }

    fn wrap<F: Future>(&self, inner: F) -> Paused<F> {
        Paused {
            pause: self.clone(),
            inner: Box::pin(inner),
        }
    }
}

struct Paused<F> {
    pause: Pause,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Paused<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        {
            let mut parked = self.pause.0.parked.lock().unwrap();
            if self.pause.0.on.load(Ordering::SeqCst) {
                parked.push(cx.waker().clone());
                return Poll::Pending;
            }
        }
        self.inner.as_mut().poll(cx)
    }
}

/// One reconcile's active span: (replica, key, token, first poll, last poll).
type Span = (String, String, FencingToken, Instant, Instant);

/// Every reconcile's span, written as the reconcile runs (so a cancelled one keeps its last).
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Span>>>);

/// Polls `inner` and records in `spans[index]` when it was first and last polled.
struct Tracked<F> {
    spans: Spans,
    index: usize,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let result = self.inner.as_mut().poll(cx);
        self.spans.0.lock().unwrap()[self.index].4 = Instant::now();
        result
    }
}

/// One to three steps of 0.1-1.5 s, and when to run again (within 2 s).
fn draw_steps(rng: &Mutex<fastrand::Rng>) -> (Vec<u64>, u64) {
    let mut rng = rng.lock().unwrap();
    let steps = rng.usize(1..=3);
    let pauses = (0..steps).map(|_| rng.u64(100..1500)).collect();
    (pauses, rng.u64(0..2000))
}

/// A reconcile's work on `key`: `pauses` steps, recorded in `spans` from its first poll to its
/// last.
async fn steps(spans: Spans, replica: String, key: String, token: FencingToken, pauses: Vec<u64>) {
    let index = {
        let mut all = spans.0.lock().unwrap();
        let now = Instant::now();
        all.push((replica, key, token, now, now));
        all.len() - 1
    };
    let body = async move {
        for pause in pauses {
            sleep(Duration::from_millis(pause)).await;
        }
    };
    Tracked {
        spans,
        index,
        inner: Box::pin(body),
    }
    .await
}

/// A wall clock that moves with the (paused) runtime clock, off by `offset` milliseconds. Every
/// one is read from the same anchor, so with no offset they agree, however late they were made.
fn wall_clock(offset: Arc<Mutex<i64>>) -> impl Fn() -> SystemTime + Send + Sync + 'static {
    static ANCHOR: std::sync::OnceLock<(SystemTime, Instant)> = std::sync::OnceLock::new();
    let (base, anchor) = *ANCHOR.get_or_init(|| (SystemTime::now(), Instant::now()));
    move || {
        let offset = *offset.lock().unwrap();
        let now = base + anchor.elapsed();
        if offset >= 0 {
            now + Duration::from_millis(offset as u64)
        } else {
            now - Duration::from_millis(offset.unsigned_abs())
        }
    }
}

/// A running replica: its controller (with its informer) and its elector, and its pause switch.
struct Replica {
    controller: JoinHandle<()>,
    elector: JoinHandle<()>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
    pause: Pause,
}

impl Replica {
    fn crash(self) {
        self.controller.abort();
        self.elector.abort();
    }

    /// A graceful stop: the workers first, then the elector releases the Lease.
    async fn release(mut self) {
        self.controller.abort();
        let _ = self.controller.await;
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
        let _ = self.elector.await;
    }
}

/// Starts replica `identity`: an elector and a controller on the namespace's ConfigMaps, both
/// through `relay`, both under `pause`. A reconcile runs 1 to 3 steps of 0.1-1.5 s each and
/// asks to be run again within 2 s, so every key is reconciled all the time by the leader.
fn start(
    relay: &Relay,
    ns: &str,
    identity: &str,
    wall_offset: Arc<Mutex<i64>>,
    seed: u64,
    spans: &Spans,
) -> Replica {
    let client = Client::new(Config::new(relay.url().parse().unwrap())).unwrap();
    let elector = LeaderElector::new(
        client.clone(),
        ns,
        LEASE,
        identity,
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .jitter_seed(seed)
    // This replica's wall clock, off by what the schedule stepped it by.
    .wall_clock(wall_clock(wall_offset));
    let fence = elector.fence();
    let pause = Pause::default();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let elector = tokio::spawn(pause.wrap(elector.run(async {
        let _ = released.await;
    })));
    let factory = InformerFactory::new(client);
    let controller = Controller::new(&factory.informer::<ConfigMap>(Some(ns)), 2);
    factory.start();
    let (identity, spans_log, paused) = (identity.to_string(), spans.clone(), pause.clone());
    let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
    let controller = tokio::spawn(async move {
        let _factory = factory;
        controller
            .run_fenced(
                fence,
                move |cm: Arc<ConfigMap>, _ctx: Arc<()>, token: FencingToken| {
                    let key = ObjectRef::from_obj(&*cm).to_string();
                    let (pauses, requeue) = draw_steps(&rng);
                    let work = steps(spans_log.clone(), identity.clone(), key, token, pauses);
                    paused.wrap(async move {
                        work.await;
                        Ok::<_, String>(Action::RequeueAfter(Duration::from_millis(requeue)))
                    })
                },
                Arc::new(()),
                std::future::pending(),
            )
            .await;
    });
    Replica {
        controller,
        elector,
        release: Some(release),
        pause,
    }
}

/// Fails if two replicas' spans of one key overlap; returns how many replicas reconciled.
fn assert_no_overlap(spans: &[Span], context: &str) -> usize {
    let mut by_key: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for span in spans {
        by_key.entry(&span.1).or_default().push(span);
    }
    for (key, spans) in by_key {
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if a.0 != b.0 && a.3 <= b.4 && b.3 <= a.4 {
                    panic!(
                        "{context}: {key} reconciled by {} ({}, {:?}..{:?}) and {} ({}, \
                         {:?}..{:?}) at once",
                        a.0, a.2, a.3, a.4, b.0, b.2, b.3, b.4
                    );
                }
            }
        }
    }
    let mut replicas: Vec<&str> = spans.iter().map(|s| s.0.as_str()).collect();
    replicas.sort_unstable();
    replicas.dedup();
    replicas.len()
}

/// What one schedule did, for the check that the runs are not vacuous.
#[derive(Default, Debug)]
struct Tally {
    reconciles: usize,
    /// Schedules in which at least two replicas reconciled.
    handovers: usize,
    pauses: usize,
    clock_steps: usize,
    deletions: usize,
    partitions: usize,
}

/// What a schedule did (its faults, the sharder's moves, the shards' fences), printed if it
/// fails.
#[derive(Clone, Default)]
struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    fn add(&self, what: String) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{:?} {what}", Instant::now()));
    }
}

/// The faults of a setting beyond crashes, releases, restarts, partitions, slow links and
/// pauses.
struct Faults<'a> {
    /// Deletes the Lease; `None` where that is not a fault of the setting.
    delete_lease: Option<&'a dyn Fn()>,
    /// The bound of every replica's wall-clock offset, in milliseconds.
    max_offset_ms: i64,
}

/// Plays one seeded schedule on `n` replicas, each behind a relay of its own and started (again)
/// by `start(i, relay, wall-clock offset, seed)`: two minutes of faults, then everything healed
/// for 30 s, then every replica crashed.
async fn play(
    sim: &Simulator,
    rng: &mut fastrand::Rng,
    n: usize,
    start: impl Fn(usize, &Relay, Arc<Mutex<i64>>, u64) -> Replica,
    faults: Faults<'_>,
    trace: &Trace,
    tally: &mut Tally,
) {
    let mut relays = Vec::new();
    for _ in 0..n {
        relays.push(Relay::start(sim.addr()).await);
    }
    let offsets: Vec<Arc<Mutex<i64>>> = (0..n).map(|_| Arc::default()).collect();
    let first = rng.u64(..);
    let mut replicas: Vec<Option<Replica>> = (0..n)
        .map(|i| Some(start(i, &relays[i], offsets[i].clone(), first + i as u64)))
        .collect();
    let chaos_end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < chaos_end {
        sleep(Duration::from_millis(rng.u64(500..5000))).await;
        let i = rng.usize(0..n);
        let fault = rng.u32(0..14);
        trace.add(format!("replica {i}: fault {fault}"));
        match fault {
            0 => {
                if let Some(r) = replicas[i].take() {
                    r.crash();
                }
            }
            1 => {
                if let Some(r) = replicas[i].take() {
                    if !r.pause.is_on() {
                        r.release().await;
                    } else {
                        r.crash();
                    }
                }
            }
            2 | 3 => {
                if replicas[i].is_none() {
                    replicas[i] = Some(start(i, &relays[i], offsets[i].clone(), rng.u64(..)));
                }
            }
            4 => {
                tally.partitions += 1;
                relays[i].set(Link::Blackhole);
            }
            5 => {
                tally.partitions += 1;
                relays[i].set(Link::Refuse);
            }
            6 => relays[i].set(Link::Delay(Duration::from_millis(rng.u64(1..12_000)))),
            7 | 8 => {
                // A pause longer than the Lease, mostly: 2 to 40 s.
                if let Some(r) = &replicas[i] {
                    if !r.pause.is_on() {
                        tally.pauses += 1;
                        let pause = r.pause.clone();
                        pause.set(true);
                        let d = Duration::from_millis(rng.u64(2_000..40_000));
                        tokio::spawn(async move {
                            sleep(d).await;
                            pause.set(false);
                        });
                    }
                }
            }
            9 => {
                tally.clock_steps += 1;
                let max = faults.max_offset_ms;
                let mut offset = offsets[i].lock().unwrap();
                *offset = (*offset + rng.i64(-max..=max)).clamp(-max, max);
            }
            10 if faults.delete_lease.is_some() => {
                tally.deletions += 1;
                (faults.delete_lease.unwrap())();
            }
            _ => relays[i].set(Link::Up),
        }
    }
    for i in 0..n {
        relays[i].set(Link::Up);
        if let Some(r) = &replicas[i] {
            r.pause.set(false);
        } else {
            replicas[i] = Some(start(i, &relays[i], offsets[i].clone(), rng.u64(..)));
        }
    }
    sleep(Duration::from_secs(30)).await;
    for r in replicas.into_iter().flatten() {
        r.crash();
    }
    tokio::task::yield_now().await;
}

/// Checks a played schedule's spans (printing its trace if they overlap) and counts them.
fn check(spans: &Spans, trace: &Trace, context: &str, tally: &mut Tally) {
    let spans = spans.0.lock().unwrap().clone();
    tally.reconciles += spans.len();
    let checked = std::panic::catch_unwind(|| assert_no_overlap(&spans, context));
    match checked {
        Ok(replicas) => tally.handovers += usize::from(replicas >= 2),
        Err(panic) => {
            for line in trace.0.lock().unwrap().iter() {
                eprintln!("{line}");
            }
            std::panic::resume_unwind(panic);
        }
    }
}

/// Creates the ConfigMaps `k0`.. of namespace `ns`.
fn create_keys(sim: &Simulator, ns: &str) {
    for k in 0..KEYS {
        sim.create(
            "configmaps",
            Some(ns),
            json!({"metadata": {"name": format!("k{k}")}}),
        )
        .unwrap();
    }
}

/// One seeded schedule of 2 or 3 leader-elected replicas, their wall clocks stepped by up to
/// ten minutes either way, their Lease deleted now and then.
async fn schedule(sim: &Simulator, seed: u64, tally: &mut Tally) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ns = format!("s{seed}");
    create_keys(sim, &ns);
    let (spans, trace) = (Spans::default(), Trace::default());
    let n = rng.usize(2..=3);
    let delete = || {
        let _ = sim.delete("leases", Some(&ns), LEASE);
    };
    let faults = Faults {
        delete_lease: Some(&delete),
        max_offset_ms: 600_000,
    };
    let start = |i: usize, relay: &Relay, offset, seed| {
        start(relay, &ns, &format!("r{i}"), offset, seed, &spans)
    };
    play(sim, &mut rng, n, start, faults, &trace, tally).await;
    check(&spans, &trace, &format!("seed {seed}"), tally);
}

#[tokio::test(start_paused = true)]
async fn no_key_is_reconciled_by_two_replicas_at_once_across_1000_seeded_schedules() {
    let sim = Simulator::start().await.unwrap();
    let schedules: u64 = std::env::var("REPLICA_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let mut tally = Tally::default();
    for seed in 0..schedules {
        schedule(&sim, seed, &mut tally).await;
    }
    eprintln!("{schedules} schedules: {tally:?}");
    // Not vacuous: in many schedules the work moves between replicas, through every kind of
    // fault (542 of 1,000 when written).
    assert!(tally.handovers as u64 * 5 >= schedules * 2, "{tally:?}");
    assert!(tally.pauses as u64 >= schedules, "{tally:?}");
    assert!(tally.clock_steps as u64 * 2 >= schedules, "{tally:?}");
    assert!(tally.deletions as u64 * 2 >= schedules, "{tally:?}");
}

// Sharded replicas: each shard of a timebertt ring holds a Lease of its own, and the test plays
// the sharder.

const RING: &str = "ring";

/// Starts shard `name`: its Lease and a controller on the namespace's ConfigMaps labelled for
/// it, both through `relay`, both under a pause switch. A reconcile acknowledges a drain, or
/// works on an object of its own as the leader's replicas do.
fn start_shard(
    relay: &Relay,
    ns: &str,
    name: &str,
    wall_offset: Arc<Mutex<i64>>,
    seed: u64,
    spans: &Spans,
    trace: &Trace,
) -> Replica {
    use informer::reflector::ReflectorOptions;
    use informer::sharding::{Assignment, Shard};
    let client = Client::new(Config::new(relay.url().parse().unwrap())).unwrap();
    let shard = Shard::new(
        client.clone(),
        ns,
        RING,
        name,
        LeaderElectionConfig::default(),
    )
    .unwrap()
    .wall_clock(wall_clock(wall_offset));
    let factory = InformerFactory::with_options(
        client.clone(),
        ReflectorOptions {
            label_selector: Some(shard.label_selector()),
            ..Default::default()
        },
    );
    let controller = Controller::new(&factory.informer::<ConfigMap>(Some(ns)), 2);
    factory.start();
    let (fence, assigner) = (shard.fence(), shard.assigner());
    {
        // The fence's openings and closings, for the trace.
        let mut f = shard.fence();
        let (who, trace) = (name.to_string(), trace.clone());
        tokio::spawn(async move {
            loop {
                let v = f.borrow_and_update().clone();
                trace.add(format!("{who} fence {:?}", v.map(|t| t.to_string())));
                if f.changed().await.is_err() {
                    trace.add(format!("{who} fence gone"));
                    return;
                }
            }
        });
    }
    let pause = Pause::default();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let elector = tokio::spawn(pause.wrap(shard.run(async {
        let _ = released.await;
    })));
    let (name, spans, paused) = (name.to_string(), spans.clone(), pause.clone());
    let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
    let controller = tokio::spawn(async move {
        let _factory = factory;
        controller
            .run_fenced(
                fence,
                move |cm: Arc<ConfigMap>, client: Arc<Client>, token: FencingToken| {
                    let key = ObjectRef::from_obj(&*cm).to_string();
                    let (pauses, requeue) = draw_steps(&rng);
                    let work = steps(spans.clone(), name.clone(), key, token, pauses);
                    let assigner = assigner.clone();
                    paused.wrap(async move {
                        match assigner.assignment(&cm.metadata) {
                            Assignment::Drain => assigner
                                .acknowledge_drain(&client, &*cm)
                                .await
                                .map_err(|e| e.to_string())?,
                            Assignment::Elsewhere => {}
                            Assignment::Ours => work.await,
                        }
                        Ok::<_, String>(Action::RequeueAfter(Duration::from_millis(requeue)))
                    })
                },
                Arc::new(client),
                std::future::pending(),
            )
            .await;
    });
    Replica {
        controller,
        elector,
        release: Some(release),
        pause,
    }
}

/// What the sharder did, for the check that the runs are not vacuous.
#[derive(Default, Debug)]
struct Moves {
    /// Objects moved off a dead shard.
    from_dead: usize,
    /// Drains asked of a ready shard.
    drains: usize,
}

/// The sharder, as `informer::sharding` describes timebertt's, once a second on its own
/// (correct) clock: a shard is ready while it holds its Lease and `renewTime` +
/// `leaseDurationSeconds` is ahead; once `renewTime` + 2 × `leaseDurationSeconds` has passed it
/// is dead, the sharder takes its Lease over and moves its objects to ready shards at once. An
/// object of no shard goes to a ready one; now and then it drains an object of a ready shard
/// (the shard removes both labels, then the object is assigned anew).
async fn sharder(
    sim: informer_sim::SimHandle,
    ns: String,
    shards: Vec<String>,
    seed: u64,
    moves: Arc<Mutex<Moves>>,
    trace: Trace,
) {
    use informer::leaderelection::{format_micro_time, parse_micro_time};
    use informer::sharding::{drain_label, shard_label};
    let mut rng = fastrand::Rng::with_seed(seed);
    let now = wall_clock(Arc::default());
    loop {
        sleep(Duration::from_secs(1)).await;
        let at = now();
        let (mut ready, mut dead) = (Vec::new(), Vec::new());
        for name in &shards {
            let Ok(lease) = sim.get("leases", Some(&ns), name) else {
                continue; // not there yet: neither ready nor dead
            };
            let spec = &lease["spec"];
            let held = spec["holderIdentity"].as_str() == Some(name.as_str());
            let duration = Duration::from_secs(spec["leaseDurationSeconds"].as_u64().unwrap_or(0));
            let renewed = spec["renewTime"]
                .as_str()
                .and_then(parse_micro_time)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if held && renewed + duration > at {
                ready.push(name.clone());
            } else if !held || renewed + 2 * duration < at {
                if held {
                    let taken = json!({"spec": {"holderIdentity": "sharder",
                                                "renewTime": format_micro_time(at)}});
                    let _ = sim.patch("leases", Some(&ns), name, &taken);
                }
                dead.push(name.clone());
            }
        }
        for k in 0..KEYS {
            let name = format!("k{k}");
            let Ok(cm) = sim.get("configmaps", Some(&ns), &name) else {
                continue;
            };
            let labels = &cm["metadata"]["labels"];
            let owner = labels[shard_label(RING)].as_str().map(str::to_string);
            let draining = labels[drain_label(RING)].is_string();
            let assign = |to: &str| json!({"metadata": {"labels": {shard_label(RING): to, drain_label(RING): null}}});
            match owner {
                None if !ready.is_empty() => {
                    let to = &ready[rng.usize(..ready.len())];
                    trace.add(format!("{name} unowned to {to}"));
                    let _ = sim.patch("configmaps", Some(&ns), &name, &assign(to));
                }
                Some(o) if dead.contains(&o) && !ready.is_empty() => {
                    let to = &ready[rng.usize(..ready.len())];
                    trace.add(format!("{name} from dead {o} to {to}"));
                    if sim
                        .patch("configmaps", Some(&ns), &name, &assign(to))
                        .is_ok()
                    {
                        moves.lock().unwrap().from_dead += 1;
                    }
                }
                Some(o)
                    if !draining && ready.contains(&o) && ready.len() > 1 && rng.u32(..20) == 0 =>
                {
                    trace.add(format!("{name} drain {o}"));
                    let drain = json!({"metadata": {"labels": {drain_label(RING): "true"}}});
                    if sim.patch("configmaps", Some(&ns), &name, &drain).is_ok() {
                        moves.lock().unwrap().drains += 1;
                    }
                }
                _ => {}
            }
        }
    }
}

/// One seeded schedule of 2 or 3 shards under the sharder, their wall clocks kept within
/// ±15 s of the sharder's (a shard whose clock is behind by more than 2 × LeaseDuration −
/// RenewDeadline, 20 s, can have its objects moved while its fence is open, as
/// `informer::sharding` documents); no Lease deletions.
async fn shard_schedule(sim: &Simulator, seed: u64, tally: &mut Tally, moves: &Arc<Mutex<Moves>>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ns = format!("shards{seed}");
    create_keys(sim, &ns);
    let (spans, trace) = (Spans::default(), Trace::default());
    let n = rng.usize(2..=3);
    let ids: Vec<String> = (0..n).map(|i| format!("shard-{i}")).collect();
    let sharder = tokio::spawn(sharder(
        sim.api(),
        ns.clone(),
        ids.clone(),
        seed,
        moves.clone(),
        trace.clone(),
    ));
    let faults = Faults {
        delete_lease: None,
        max_offset_ms: 15_000,
    };
    let start = |i: usize, relay: &Relay, offset, seed| {
        start_shard(relay, &ns, &ids[i], offset, seed, &spans, &trace)
    };
    play(sim, &mut rng, n, start, faults, &trace, tally).await;
    sharder.abort();
    check(&spans, &trace, &format!("shard seed {seed}"), tally);
}

#[tokio::test(start_paused = true)]
async fn no_key_is_reconciled_by_two_shards_at_once_across_1000_seeded_schedules() {
    let sim = Simulator::start().await.unwrap();
    let schedules: u64 = std::env::var("REPLICA_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let mut tally = Tally::default();
    let moves = Arc::new(Mutex::new(Moves::default()));
    for seed in 0..schedules {
        shard_schedule(&sim, seed, &mut tally, &moves).await;
    }
    let moves = moves.lock().unwrap();
    eprintln!("{schedules} shard schedules: {tally:?}, {moves:?}");
    // Not vacuous: objects move between shards, off dead ones and by drains.
    assert!(tally.handovers as u64 * 2 >= schedules, "{tally:?}");
    assert!(moves.from_dead as u64 >= schedules, "{moves:?}");
    assert!(moves.drains as u64 >= schedules, "{moves:?}");
    assert!(tally.pauses as u64 >= schedules, "{tally:?}");
}
