//! Metrics for Prometheus (feature `metrics`): every client, work queue, informer and leader
//! elector of the process records into one registry (client-go's `legacyregistry`), under
//! client-go's metric names, and [`gather`] renders it in the Prometheus text format, version
//! 0.0.4, for a `/metrics` endpoint.
//!
//! Without the feature this module does not exist, no recording point is compiled and the
//! `prometheus` crate is not linked: nothing is recorded and nothing costs.
//!
//! # What is recorded
//!
//! | name | type | labels | recorded |
//! |---|---|---|---|
//! | `rest_client_requests_total` | counter | `code`, `method`, `host` | each response head (`code` its status), or `<error>` when no response came |
//! | `rest_client_request_duration_seconds` | histogram | `verb`, `host` | time to the response head (or to the failure) |
//! | `workqueue_depth` | gauge | `name` | keys waiting, read from the live queues |
//! | `workqueue_adds_total` | counter | `name` | adds not deduplicated away |
//! | `workqueue_retries_total` | counter | `name` | `add_after` / `add_rate_limited` calls |
//! | `workqueue_queue_duration_seconds` | histogram | `name` | add to `get` |
//! | `workqueue_work_duration_seconds` | histogram | `name` | `get` to `done` |
//! | `workqueue_unfinished_work_seconds` | gauge | `name` | sum of the running times of keys in flight |
//! | `workqueue_longest_running_processor_seconds` | gauge | `name` | running time of the oldest key in flight |
//! | `leader_election_master_status` | gauge | `name` (the Lease's) | 1 while leading, 0 otherwise |
//! | `informer_queued_items` | gauge | `name`, `group`, `version`, `resource` | keys pending in the informer's fifo |
//! | `informer_processing_latency_seconds` | histogram | `name`, `group`, `version`, `resource` | time the processor spends on one pop (store update and handing notifications to the handlers) |
//! | `informer_store_resource_version` | gauge | `name`, `group`, `version`, `resource` | the store's last applied resourceVersion, its last 15 digits as a number (absent when not numeric) |
//! | `informer_events_total` | counter | `name`, `group`, `version`, `resource` | watch events received (bookmarks included) |
//! | `informer_lists_total` | counter | `name`, `group`, `version`, `resource` | complete lists: the first and every relist |
//! | `informer_watches_total` | counter | `name`, `group`, `version`, `resource` | watches opened |
//!
//! The `rest_client_*`, `workqueue_*` and `leader_election_master_status` names and labels are
//! client-go's (component-base's `restclient`, `workqueue` and `leaderelection` adapters);
//! `informer_queued_items`, `informer_processing_latency_seconds` and
//! `informer_store_resource_version` are client-go 1.36's informer metrics (component-base
//! `clientgo/fifo`). `informer_events_total`, `informer_lists_total` and `informer_watches_total`
//! have no client-go counterpart (client-go dropped its reflector metrics) and are this crate's.
//!
//! An informer's `name` is its resource's plural (`pods`); informers of one resource share their
//! series (gauges and counters are summed, the resourceVersion is the highest). A work queue is
//! exported only once it has a name, as in client-go: [`WorkQueue::with_name`], or, for a
//! `Controller`'s queue, the lowercase kind of its primary resource (`deployment`). Queues of one
//! name share their series. Series read from live queues and informers (the gauges, and the
//! informers' counters) disappear when the queue or informer is dropped.
//!
//! [`WorkQueue::with_name`]: crate::workqueue::WorkQueue::with_name
//!
//! # Buckets
//!
//! * `rest_client_request_duration_seconds`: client-go's, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4,
//!   8, 15, 30, 60.
//! * `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`: client-go's, 1e-8 to
//!   10 by factors of 10.
//! * `informer_processing_latency_seconds`: 1e-6 to 10 by factors of 10 (a pop takes
//!   microseconds here: the handlers run on their own pool).
//!
//! # Cost
//!
//! Counters and histograms are recorded at the event (atomic additions on a series resolved
//! once per queue, informer or request); gauges are read from the live objects when [`gather`]
//! runs, so a queue's hot path does not update them.
//!
//! # Serving
//!
//! Serve [`gather`]'s text at `/metrics` with `Content-Type: text/plain; version=0.0.4`, from
//! any HTTP server the program already runs.
//!
//! ```
//! use informer::workqueue::WorkQueue;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = WorkQueue::new().with_name("doc-example");
//! queue.add("default/web".to_string());
//! let text = informer::metrics::gather();
//! assert!(text.contains("workqueue_adds_total{name=\"doc-example\"} 1"));
//! assert!(text.contains("workqueue_depth{name=\"doc-example\"} 1"));
//! # }
//! ```

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric of this process, in the Prometheus text exposition format (version 0.0.4),
/// ready to serve at `/metrics` with `Content-Type: text/plain; version=0.0.4`.
pub fn gather() -> String {
    let families = metrics().registry.gather();
    let mut text = Vec::new();
    // Writing to a Vec fails only on a malformed family, which this module does not build.
    if let Err(e) = TextEncoder::new().encode(&families, &mut text) {
        tracing::warn!(error = %e, "metrics: encoding failed");
    }
    String::from_utf8(text).unwrap_or_default()
}

/// client-go's `rest_client_request_duration_seconds` buckets.
const REST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];
/// client-go's work queue duration buckets: `ExponentialBuckets(10e-9, 10, 10)`.
const QUEUE_BUCKETS: &[f64] = &[1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];
/// The informer processing latency buckets (this crate's choice).
const INFORMER_BUCKETS: &[f64] = &[1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// The labels of an informer's series.
const INFORMER_LABELS: &[&str] = &["name", "group", "version", "resource"];

/// The process-wide registry and the metrics recorded at the event.
struct Metrics {
    registry: Registry,
    rest_requests: IntCounterVec,
    rest_duration: HistogramVec,
    leader: GaugeVec,
    queue_adds: IntCounterVec,
    queue_retries: IntCounterVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    informer_latency: HistogramVec,
    queues: Arc<Mutex<Vec<Weak<dyn QueueSource>>>>,
    informers: Arc<Mutex<Vec<Weak<dyn InformerSource>>>>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let vec = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(vec.clone()))
        .expect("registered once");
    vec
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    let vec = HistogramVec::new(opts, labels).expect("valid metric");
    registry
        .register(Box::new(vec.clone()))
        .expect("registered once");
    vec
}

impl Metrics {
    fn new() -> Metrics {
        let registry = Registry::new();
        let rest_requests = counter(
            &registry,
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            &["code", "method", "host"],
        );
        let rest_duration = histogram(
            &registry,
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            &["verb", "host"],
            REST_BUCKETS,
        );
        let leader = GaugeVec::new(
            Opts::new(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
                 backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ),
            &["name"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(leader.clone()))
            .expect("registered once");
        let queue_adds = counter(
            &registry,
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            &["name"],
        );
        let queue_retries = counter(
            &registry,
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            &["name"],
        );
        let queue_duration = histogram(
            &registry,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            &["name"],
            QUEUE_BUCKETS,
        );
        let work_duration = histogram(
            &registry,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            &["name"],
            QUEUE_BUCKETS,
        );
        let informer_latency = histogram(
            &registry,
            "informer_processing_latency_seconds",
            "Time in seconds the informer spends processing one pop of its queue.",
            INFORMER_LABELS,
            INFORMER_BUCKETS,
        );
        let queues: Arc<Mutex<Vec<Weak<dyn QueueSource>>>> = Arc::default();
        registry
            .register(Box::new(QueueCollector::new(queues.clone())))
            .expect("registered once");
        let informers: Arc<Mutex<Vec<Weak<dyn InformerSource>>>> = Arc::default();
        registry
            .register(Box::new(InformerCollector::new(informers.clone())))
            .expect("registered once");
        Metrics {
            registry,
            rest_requests,
            rest_duration,
            leader,
            queue_adds,
            queue_retries,
            queue_duration,
            work_duration,
            informer_latency,
            queues,
            informers,
        }
    }
}

/// Locks ignoring poison: the lists stay valid whatever panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds `source` to a weak list, dropping the entries of sources that are gone.
fn register_weak<S: ?Sized>(list: &Mutex<Vec<Weak<S>>>, source: Weak<S>) {
    let mut list = lock(list);
    list.retain(|s| s.strong_count() > 0);
    list.push(source);
}

// ---- REST client ----

/// Records one request of [`Client::send`](crate::client::Client::send): `status` is the
/// response's code, `None` when no response came (client-go's `<error>`).
pub(crate) fn record_request(method: &str, host: &str, status: Option<u16>, latency: Duration) {
    let m = metrics();
    let code = match status {
        Some(code) => code.to_string(),
        None => "<error>".to_owned(),
    };
    m.rest_requests
        .with_label_values(&[code.as_str(), method, host])
        .inc();
    // Failed requests too, as client-go: the time until the failure.
    m.rest_duration
        .with_label_values(&[method, host])
        .observe(latency.as_secs_f64());
}

// ---- leader election ----

/// Sets `leader_election_master_status{name}`: 1 while leading the Lease `name`, 0 otherwise.
pub(crate) fn set_leader(name: &str, leading: bool) {
    metrics()
        .leader
        .with_label_values(&[name])
        .set(if leading { 1.0 } else { 0.0 });
}

// ---- work queues ----

/// A named work queue's series, resolved once: recording is an atomic addition.
#[derive(Clone, Debug)]
pub(crate) struct QueueRecorder {
    /// `workqueue_adds_total{name}`.
    pub(crate) adds: IntCounter,
    /// `workqueue_retries_total{name}`.
    pub(crate) retries: IntCounter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl QueueRecorder {
    /// The series of the queue `name`.
    pub(crate) fn new(name: &str) -> QueueRecorder {
        let m = metrics();
        QueueRecorder {
            adds: m.queue_adds.with_label_values(&[name]),
            retries: m.queue_retries.with_label_values(&[name]),
            queue_duration: m.queue_duration.with_label_values(&[name]),
            work_duration: m.work_duration.with_label_values(&[name]),
        }
    }

    /// A key's time from add to `get`.
    pub(crate) fn queued(&self, d: Duration) {
        self.queue_duration.observe(d.as_secs_f64());
    }

    /// A key's time from `get` to `done`.
    pub(crate) fn worked(&self, d: Duration) {
        self.work_duration.observe(d.as_secs_f64());
    }
}

/// The gauges of one work queue, read when the metrics are gathered.
#[derive(Debug)]
pub(crate) struct QueueGauges {
    pub(crate) name: Arc<str>,
    pub(crate) depth: usize,
    pub(crate) unfinished_work: Duration,
    pub(crate) longest_running_processor: Duration,
}

/// A live work queue, as the collector sees it.
pub(crate) trait QueueSource: Send + Sync {
    /// Its gauges now; `None` while it has no name.
    fn gauges(&self) -> Option<QueueGauges>;
}

/// Has `queue`'s gauges read at every [`gather`] while it lives.
pub(crate) fn register_queue(queue: Weak<dyn QueueSource>) {
    register_weak(&metrics().queues, queue);
}

/// Reads the live queues' gauges.
struct QueueCollector {
    queues: Arc<Mutex<Vec<Weak<dyn QueueSource>>>>,
    depth: IntGaugeVec,
    unfinished: GaugeVec,
    longest: GaugeVec,
}

impl QueueCollector {
    fn new(queues: Arc<Mutex<Vec<Weak<dyn QueueSource>>>>) -> Self {
        let gauge = |name: &str, help: &str| {
            GaugeVec::new(Opts::new(name, help), &["name"]).expect("valid metric")
        };
        QueueCollector {
            queues,
            depth: IntGaugeVec::new(
                Opts::new("workqueue_depth", "Current depth of workqueue"),
                &["name"],
            )
            .expect("valid metric"),
            unfinished: gauge(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has done that is in progress and hasn't been \
                 observed by work_duration. Large values indicate stuck threads. One can \
                 deduce the number of stuck threads by observing the rate at which this \
                 increases.",
            ),
            longest: gauge(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
            ),
        }
    }
}

impl Collector for QueueCollector {
    fn desc(&self) -> Vec<&Desc> {
        [
            &self.depth.desc(),
            &self.unfinished.desc(),
            &self.longest.desc(),
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // Held throughout, so that two gathers do not mix their resets and sets.
        let mut queues = lock(&self.queues);
        queues.retain(|q| q.strong_count() > 0);
        self.depth.reset();
        self.unfinished.reset();
        self.longest.reset();
        for gauges in queues.iter().filter_map(|q| q.upgrade()?.gauges()) {
            let name = [&*gauges.name];
            self.depth
                .with_label_values(&name)
                .add(i64::try_from(gauges.depth).unwrap_or(i64::MAX));
            self.unfinished
                .with_label_values(&name)
                .add(gauges.unfinished_work.as_secs_f64());
            let longest = self.longest.with_label_values(&name);
            longest.set(
                longest
                    .get()
                    .max(gauges.longest_running_processor.as_secs_f64()),
            );
        }
        let mut families = self.depth.collect();
        families.extend(self.unfinished.collect());
        families.extend(self.longest.collect());
        families
    }
}

// ---- informers ----

/// An informer's label values: name, group, version, resource.
pub(crate) type InformerLabels = [String; 4];

/// An informer's processing latency series, resolved once.
#[derive(Clone, Debug)]
pub(crate) struct InformerRecorder {
    latency: Histogram,
}

impl InformerRecorder {
    /// The series of the informer with `labels`.
    pub(crate) fn new(labels: &InformerLabels) -> InformerRecorder {
        InformerRecorder {
            latency: metrics().informer_latency.with_label_values(labels),
        }
    }

    /// The processor's time on one pop.
    pub(crate) fn processed(&self, d: Duration) {
        self.latency.observe(d.as_secs_f64());
    }
}

/// The figures of one informer, read when the metrics are gathered.
#[derive(Debug)]
pub(crate) struct InformerFigures {
    pub(crate) labels: InformerLabels,
    pub(crate) queued_items: usize,
    /// The store's last applied resourceVersion.
    pub(crate) resource_version: String,
    pub(crate) events: u64,
    pub(crate) lists: u64,
    pub(crate) watches: u64,
}

/// A live informer, as the collector sees it.
pub(crate) trait InformerSource: Send + Sync {
    /// Its figures now.
    fn figures(&self) -> InformerFigures;
}

/// Has `informer`'s figures read at every [`gather`] while it lives.
pub(crate) fn register_informer(informer: Weak<dyn InformerSource>) {
    register_weak(&metrics().informers, informer);
}

/// client-go's reading of a resourceVersion for the gauge: its last 15 digits as a number
/// (exact in an f64), `None` if it is not a decimal number.
fn resource_version_value(rv: &str) -> Option<f64> {
    if rv.is_empty() || !rv.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let low = &rv[rv.len().saturating_sub(15)..];
    low.parse::<u64>().ok().map(|v| v as f64)
}

/// Reads the live informers' figures.
struct InformerCollector {
    informers: Arc<Mutex<Vec<Weak<dyn InformerSource>>>>,
    queued: IntGaugeVec,
    resource_version: GaugeVec,
    events: IntCounterVec,
    lists: IntCounterVec,
    watches: IntCounterVec,
}

impl InformerCollector {
    fn new(informers: Arc<Mutex<Vec<Weak<dyn InformerSource>>>>) -> Self {
        let counter = |name: &str, help: &str| {
            IntCounterVec::new(Opts::new(name, help), INFORMER_LABELS).expect("valid metric")
        };
        InformerCollector {
            informers,
            queued: IntGaugeVec::new(
                Opts::new(
                    "informer_queued_items",
                    "Number of items currently queued in the informer's FIFO.",
                ),
                INFORMER_LABELS,
            )
            .expect("valid metric"),
            resource_version: GaugeVec::new(
                Opts::new(
                    "informer_store_resource_version",
                    "The last 15 digits of the resourceVersion the informer's store last applied.",
                ),
                INFORMER_LABELS,
            )
            .expect("valid metric"),
            events: counter(
                "informer_events_total",
                "Watch events the informer received, bookmarks included.",
            ),
            lists: counter(
                "informer_lists_total",
                "Complete lists the informer made, the first one and every relist.",
            ),
            watches: counter("informer_watches_total", "Watches the informer opened."),
        }
    }
}

impl Collector for InformerCollector {
    fn desc(&self) -> Vec<&Desc> {
        [
            &self.queued.desc(),
            &self.resource_version.desc(),
            &self.events.desc(),
            &self.lists.desc(),
            &self.watches.desc(),
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut informers = lock(&self.informers);
        informers.retain(|i| i.strong_count() > 0);
        self.queued.reset();
        self.resource_version.reset();
        self.events.reset();
        self.lists.reset();
        self.watches.reset();
        for f in informers
            .iter()
            .filter_map(|i| Some(i.upgrade()?.figures()))
        {
            let labels = &f.labels;
            self.queued
                .with_label_values(labels)
                .add(i64::try_from(f.queued_items).unwrap_or(i64::MAX));
            if let Some(rv) = resource_version_value(&f.resource_version) {
                let gauge = self.resource_version.with_label_values(labels);
                gauge.set(gauge.get().max(rv));
            }
            self.events.with_label_values(labels).inc_by(f.events);
            self.lists.with_label_values(labels).inc_by(f.lists);
            self.watches.with_label_values(labels).inc_by(f.watches);
        }
        let mut families = self.queued.collect();
        for vec in [&self.events, &self.lists, &self.watches] {
            families.extend(vec.collect());
        }
        families.extend(self.resource_version.collect());
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// One sample of the text format: name, labels, value.
    type Sample = (String, BTreeMap<String, String>, f64);

    /// Parses the Prometheus text format 0.0.4 strictly enough to catch a malformed exposition:
    /// every line a `# HELP`, a `# TYPE` (before its samples, once per family) or a sample with
    /// a valid name, well-formed quoted labels and a float value. Returns the samples and the
    /// families' types.
    fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
        fn valid_name(name: &str) -> bool {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        }
        assert!(text.ends_with('\n'), "the exposition ends with a newline");
        let mut types = BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').expect("HELP has a name and a text");
                assert!(valid_name(name), "{line}");
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE has a name and a type");
                assert!(valid_name(name), "{line}");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "{line}"
                );
                assert!(
                    types.insert(name.to_owned(), kind.to_owned()).is_none(),
                    "{line}"
                );
            } else {
                let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
                let value: f64 = match value {
                    "+Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
                };
                let (name, labels) = match series.split_once('{') {
                    None => (series, BTreeMap::new()),
                    Some((name, rest)) => {
                        let mut labels = BTreeMap::new();
                        let mut rest = rest.strip_suffix('}').expect("labels close");
                        while !rest.is_empty() {
                            let (label, after) = rest.split_once("=\"").expect("label=\"value\"");
                            assert!(valid_name(label), "{line}");
                            let mut value = String::new();
                            let mut chars = after.char_indices();
                            let end = loop {
                                match chars.next().expect("value closes") {
                                    (_, '\\') => value.push(chars.next().expect("escape").1),
                                    (i, '"') => break i,
                                    (_, c) => value.push(c),
                                }
                            };
                            labels.insert(label.to_owned(), value);
                            rest = after[end + 1..].trim_start_matches(',');
                        }
                        (name, labels)
                    }
                };
                assert!(valid_name(name), "{line}");
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| {
                        let base = name.strip_suffix(suffix)?;
                        (types.get(base).map(String::as_str) == Some("histogram")).then_some(base)
                    })
                    .unwrap_or(name);
                assert!(
                    types.contains_key(family),
                    "a sample before its TYPE: {line}"
                );
                samples.push((name.to_owned(), labels, value));
            }
        }
        (samples, types)
    }

    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|s| s.2)
    }

    struct FakeInformer;

    impl InformerSource for FakeInformer {
        fn figures(&self) -> InformerFigures {
            InformerFigures {
                labels: [
                    "unit-pods".into(),
                    String::new(),
                    "v1".into(),
                    "pods".into(),
                ],
                queued_items: 3,
                resource_version: "1234".into(),
                events: 7,
                lists: 2,
                watches: 1,
            }
        }
    }

    #[tokio::test]
    async fn gather_renders_every_name_in_the_text_format_after_some_activity() {
        record_request(
            "GET",
            "unit.example:6443",
            Some(200),
            Duration::from_millis(30),
        );
        record_request("GET", "unit.example:6443", None, Duration::from_millis(1));
        set_leader("unit-lease", true);

        let queue = crate::workqueue::WorkQueue::new().with_name("unit-queue");
        queue.add("a".to_string());
        queue.add("b".to_string());
        let key = queue.get().await.unwrap();
        queue.done(&key);
        queue.add_after("c".to_string(), Duration::ZERO);
        let _in_flight = queue.get().await.unwrap();

        let informer: Arc<dyn InformerSource> = Arc::new(FakeInformer);
        register_informer(Arc::downgrade(&informer));
        InformerRecorder::new(&FakeInformer.figures().labels).processed(Duration::from_micros(5));

        let text = gather();
        let (samples, types) = parse(&text);
        for (name, kind) in [
            ("rest_client_requests_total", "counter"),
            ("rest_client_request_duration_seconds", "histogram"),
            ("workqueue_depth", "gauge"),
            ("workqueue_adds_total", "counter"),
            ("workqueue_queue_duration_seconds", "histogram"),
            ("workqueue_work_duration_seconds", "histogram"),
            ("workqueue_retries_total", "counter"),
            ("workqueue_unfinished_work_seconds", "gauge"),
            ("workqueue_longest_running_processor_seconds", "gauge"),
            ("leader_election_master_status", "gauge"),
            ("informer_queued_items", "gauge"),
            ("informer_processing_latency_seconds", "histogram"),
            ("informer_store_resource_version", "gauge"),
            ("informer_events_total", "counter"),
            ("informer_lists_total", "counter"),
            ("informer_watches_total", "counter"),
        ] {
            assert_eq!(
                types.get(name).map(String::as_str),
                Some(kind),
                "{name} in:\n{text}"
            );
        }

        let host = ("host", "unit.example:6443");
        let get = [("code", "200"), ("method", "GET"), host];
        assert_eq!(
            value(&samples, "rest_client_requests_total", &get),
            Some(1.0)
        );
        let failed = [("code", "<error>"), ("method", "GET"), host];
        assert_eq!(
            value(&samples, "rest_client_requests_total", &failed),
            Some(1.0)
        );
        let get = [("verb", "GET"), host];
        assert_eq!(
            value(&samples, "rest_client_request_duration_seconds_count", &get),
            Some(2.0)
        );
        // 30 ms: above the 0.025 bucket, within the 0.1 one; the failure after 1 ms in the first.
        let bucket = |le| [("verb", "GET"), host, ("le", le)];
        let buckets = "rest_client_request_duration_seconds_bucket";
        assert_eq!(value(&samples, buckets, &bucket("0.005")), Some(1.0));
        assert_eq!(value(&samples, buckets, &bucket("0.025")), Some(1.0));
        assert_eq!(value(&samples, buckets, &bucket("0.1")), Some(2.0));
        assert_eq!(value(&samples, buckets, &bucket("+Inf")), Some(2.0));

        let q = [("name", "unit-queue")];
        assert_eq!(value(&samples, "workqueue_adds_total", &q), Some(3.0));
        assert_eq!(value(&samples, "workqueue_retries_total", &q), Some(1.0));
        assert_eq!(value(&samples, "workqueue_depth", &q), Some(1.0));
        assert_eq!(
            value(&samples, "workqueue_queue_duration_seconds_count", &q),
            Some(2.0)
        );
        assert_eq!(
            value(&samples, "workqueue_work_duration_seconds_count", &q),
            Some(1.0)
        );
        let le = |le| [("name", "unit-queue"), ("le", le)];
        let buckets = "workqueue_queue_duration_seconds_bucket";
        assert_eq!(value(&samples, buckets, &le("0.00000001")), Some(0.0));
        assert_eq!(value(&samples, buckets, &le("10")), Some(2.0));
        assert!(value(&samples, "workqueue_unfinished_work_seconds", &q).is_some());
        assert!(value(&samples, "workqueue_longest_running_processor_seconds", &q).is_some());

        let lease = [("name", "unit-lease")];
        assert_eq!(
            value(&samples, "leader_election_master_status", &lease),
            Some(1.0)
        );

        let i = [
            ("name", "unit-pods"),
            ("group", ""),
            ("version", "v1"),
            ("resource", "pods"),
        ];
        assert_eq!(value(&samples, "informer_queued_items", &i), Some(3.0));
        assert_eq!(
            value(&samples, "informer_store_resource_version", &i),
            Some(1234.0)
        );
        assert_eq!(value(&samples, "informer_events_total", &i), Some(7.0));
        assert_eq!(value(&samples, "informer_lists_total", &i), Some(2.0));
        assert_eq!(value(&samples, "informer_watches_total", &i), Some(1.0));
        assert_eq!(
            value(&samples, "informer_processing_latency_seconds_count", &i),
            Some(1.0)
        );

        // Dropped queues and informers leave the gauges.
        drop(queue);
        drop(informer);
        let (samples, _) = parse(&gather());
        assert_eq!(value(&samples, "workqueue_depth", &q), None);
        assert_eq!(value(&samples, "informer_queued_items", &i), None);
        // Counters recorded at the event stay, as client-go's do.
        assert_eq!(value(&samples, "workqueue_adds_total", &q), Some(3.0));
    }

    #[test]
    fn a_resource_version_reads_as_its_last_15_digits() {
        assert_eq!(resource_version_value("12345"), Some(12345.0));
        assert_eq!(
            resource_version_value("99123456789012345"),
            Some(123456789012345.0)
        );
        assert_eq!(resource_version_value(""), None);
        assert_eq!(resource_version_value("abc"), None);
    }
}
