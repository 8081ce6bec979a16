//! `kwatch watch RESOURCE`: runs an informer on any resource and prints each handler
//! notification, as a table row or a JSON line:
//!
//! ```text
//! {"type":"ADDED","key":"default/web-1","resourceVersion":"42","object":{...}}
//! {"type":"SYNCED","objects":1,"resourceVersion":"42"}
//! ```
//!
//! `SYNCED` comes once, after the notification of the last object of the initial list; it gives
//! the initial list's resourceVersion and object count (the complete list's, also when an expired
//! `continue` token made the reflector list again), not the store's newer state.
//! `--until-synced` exits there, printing nothing after it; `--max-events N` exits once N watch
//! events (those after the initial list: the fifo's own count, whenever the printer happened to
//! see the sync) have been applied to the store and their notifications printed; `--stats` then
//! prints one JSON line of figures on stderr. `-o none` registers no handler: it keeps the
//! cache, waits for the informer's own sync, and counts the changes applied to the store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use informer::informer::HandlerId;
use informer::reflector::ReflectorOptions;
use informer::{HandlerFns, Informer, JsonObject, Object};
use serde::Serialize;
use tokio::sync::mpsc;

use super::args::{Format, Global, WatchArgs};
use super::connect::{self, ErrorCollector};
use super::output::Out;
use super::{CliResult, resolve};

/// One handler notification, as the handler thread hands it to the printer.
enum Notification {
    Added { obj: Arc<JsonObject>, initial: bool },
    Modified(Arc<JsonObject>),
    Deleted(Arc<JsonObject>),
}

impl Notification {
    fn initial(&self) -> bool {
        matches!(self, Notification::Added { initial: true, .. })
    }
    fn parts(&self) -> (&'static str, &Arc<JsonObject>) {
        match self {
            Notification::Added { obj, .. } => ("ADDED", obj),
            Notification::Modified(obj) => ("MODIFIED", obj),
            Notification::Deleted(obj) => ("DELETED", obj),
        }
    }
}

#[derive(Serialize)]
struct EventLine<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    key: String,
    #[serde(rename = "resourceVersion")]
    resource_version: &'a str,
    object: &'a JsonObject,
}

#[derive(Serialize)]
struct SyncedLine<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    objects: u64,
    #[serde(rename = "resourceVersion")]
    resource_version: &'a str,
}

/// The `--stats` line, in this order.
#[derive(Serialize)]
struct Stats {
    sync_seconds: Option<f64>,
    watch_events: u64,
    watch_seconds: f64,
    events_per_sec: Option<f64>,
    notifications: u64,
    objects: usize,
    peak_rss_kib: Option<u64>,
}

/// Peak resident set size in KiB (`VmHWM` of `/proc/self/status`), when the system tells.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub async fn run(global: &Global, args: WatchArgs) -> CliResult {
    let started = Instant::now();
    let (client, namespace) = connect::connect(global).await?;
    // A watch command keeps trying: every failure is printed on stderr, and only one that
    // retrying cannot fix (401, 403, an unknown resource) or the user's --sync-timeout ends it.
    let errors = ErrorCollector::printing_every_failure();
    let what = format!("watch {}", args.resource);
    let deadline = args.sync_timeout.map(|t| (started, t));
    let resource =
        resolve::resolve_retrying(&client, &args.resource, &errors, deadline, &what).await?;
    let what = format!("watch {}", resource.plural);
    // What --stats calls the sync time starts with the informer, as before discovery retried.
    let informer_started = Instant::now();
    let options = ReflectorOptions {
        label_selector: args.label_selector.clone(),
        field_selector: args.field_selector.clone(),
        on_error: Some(errors.callback()),
        ..connect::reflector_options()
    };
    let informer = Informer::dynamic(client, &resource, namespace.as_deref(), options);
    // Bounded: a terminal slower than the watch blocks the handler thread, whose queue then
    // coalesces per key, and the fifo behind it slows the watch reader: memory stays O(keys).
    let (tx, mut rx) = mpsc::channel(NOTIFICATION_BUFFER);
    // `-o none` prints nothing, so it needs no handler (a handler costs every change a call on
    // the handler pool); nothing goes through the channel (`_tx` keeps it open, so the loop
    // below still waits on it).
    let (id, _tx) = if args.output == Format::None {
        (None, Some(tx))
    } else {
        (Some(forward_notifications(&informer, tx)), None)
    };
    informer.start();

    let mut out = Out::stdout();
    let mut printer = Printer {
        format: args.output,
        notifications: 0,
        initial: 0,
    };
    let mut sync: Option<Instant> = None;
    let mut sync_observed = false;
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    let mut first: Option<Notification> = None;
    // Live notifications that came before SYNCED was printed.
    let mut held: Vec<Notification> = Vec::new();
    loop {
        tokio::select! {
            n = rx.recv() => first = n,
            // Woken by the informer the moment the handler (or the informer) has synced.
            _ = synced(&informer, id), if !sync_observed => {}
            // Error reporting and `--max-events` look at the counters now and then.
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = &mut ctrl_c => break,
        }
        // Checked before draining: once the handler is synced, every initial notification is
        // already in the channel.
        if !sync_observed && has_synced(&informer, id) {
            sync_observed = true;
        }
        let mut batch: Vec<Notification> = first.take().into_iter().collect();
        while let Ok(n) = rx.try_recv() {
            batch.push(n);
        }
        for n in batch {
            if sync.is_none() && !n.initial() {
                // A live notification: the initial ones before it are all here (the handler's
                // queue is in order); it waits until SYNCED is printed.
                held.push(n);
                continue;
            }
            printer.print(&mut out, &n)?;
        }
        if sync_observed && sync.is_none() {
            sync = Some(printer.synced(&mut out, &informer)?);
            if !args.until_synced {
                for n in held.drain(..) {
                    printer.print(&mut out, &n)?;
                }
            }
        }
        out.flush()?;
        match sync {
            None => errors.check_unsynced(started, args.sync_timeout, &what)?,
            Some(_) if args.until_synced => break,
            Some(_) => {
                if let Some(max) = args.max_events {
                    // Read in this order: the fifo's depth counts a popped key until its
                    // notifications are queued, a handler's `in_call` stays set until the call
                    // (its send to `rx`) returned, so all zero then an empty `rx` means
                    // everything received is printed.
                    let m = informer.metrics();
                    let drained = m.fifo.backlog == 0
                        && m.fifo.depth == 0
                        && m.handlers.iter().all(|(_, h)| h.depth == 0 && !h.in_call)
                        && rx.is_empty();
                    if m.fifo.events >= max && drained {
                        break;
                    }
                }
            }
        }
        if sync.is_some() {
            errors.mark_synced();
        }
    }
    // Anything already handed over is printed before exiting; `--until-synced` prints exactly
    // the initial list and SYNCED.
    while let Ok(n) = rx.try_recv() {
        if args.until_synced {
            break;
        }
        printer.print(&mut out, &n)?;
    }
    out.flush()?;
    informer.stop();
    if args.stats {
        let end = Instant::now();
        let m = informer.metrics();
        let (sync_seconds, watch_events, watch_seconds) = match sync {
            Some(at) => (
                (at - informer_started).as_secs_f64(),
                m.fifo.events,
                (end - at).as_secs_f64(),
            ),
            None => (f64::NAN, 0, 0.0),
        };
        let stats = Stats {
            sync_seconds: finite(sync_seconds),
            watch_events,
            watch_seconds: finite(watch_seconds).unwrap_or(0.0),
            events_per_sec: finite(watch_events as f64 / watch_seconds),
            // Without a handler, what a handler would have been told (before its own coalescing).
            notifications: if id.is_some() {
                printer.notifications
            } else {
                m.applied
            },
            objects: m.objects,
            peak_rss_kib: peak_rss_kib(),
        };
        eprintln!(
            "{}",
            serde_json::to_string(&stats).expect("plain numbers serialize")
        );
    }
    Ok(())
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some((x * 1e6).round() / 1e6)
}

/// Notifications between the informer's handler thread and the printer.
const NOTIFICATION_BUFFER: usize = 1024;

/// Registers a handler that sends every notification to `tx`, waiting (on the handler's own
/// thread) while the printer is `NOTIFICATION_BUFFER` behind.
fn forward_notifications(
    informer: &Informer<JsonObject>,
    tx: mpsc::Sender<Notification>,
) -> HandlerId {
    let (a, u, d) = (tx.clone(), tx.clone(), tx);
    informer.add_handler(
        HandlerFns::new()
            .on_add(move |o: &Arc<JsonObject>, initial| {
                let _ = a.blocking_send(Notification::Added {
                    obj: o.clone(),
                    initial,
                });
            })
            .on_update(move |_, new| {
                let _ = u.blocking_send(Notification::Modified(new.clone()));
            })
            .on_delete(move |gone| {
                let _ = d.blocking_send(Notification::Deleted(gone.object().clone()));
            }),
    )
}

/// Completes once the handler `id` has synced, or the informer when there is no handler.
async fn synced(informer: &Informer<JsonObject>, id: Option<HandlerId>) {
    match id {
        Some(id) => {
            informer.wait_for_handler_sync(id, Duration::MAX).await;
        }
        None => {
            // Without a timeout it returns only once synced.
            let _ = informer.wait_for_sync(Duration::MAX).await;
        }
    }
}

/// Whether the handler `id` has synced, or the informer when there is no handler.
fn has_synced(informer: &Informer<JsonObject>, id: Option<HandlerId>) -> bool {
    match id {
        Some(id) => informer.handler_has_synced(id),
        None => informer.has_synced(),
    }
}

struct Printer {
    format: Format,
    notifications: u64,
    initial: u64,
}

impl Printer {
    fn print(&mut self, out: &mut Out, n: &Notification) -> CliResult {
        self.notifications += 1;
        if n.initial() {
            self.initial += 1;
        }
        let (type_, obj) = n.parts();
        let meta = obj.meta();
        match self.format {
            Format::Jsonl | Format::Json => out.json_line(&EventLine {
                type_,
                key: meta.key(),
                resource_version: &meta.resource_version,
                object: obj,
            }),
            Format::Table => out.line(&format!(
                "{type_:<9} {:<40} {}",
                meta.key(),
                meta.resource_version
            )),
            Format::None => Ok(()),
        }
    }

    /// Prints the SYNCED line; returns when.
    fn synced(&mut self, out: &mut Out, informer: &Informer<JsonObject>) -> CliResult<Instant> {
        let m = informer.metrics();
        // The initial list's version and count: the store may already be past it.
        let list = m.reflector.initial_list.clone().unwrap_or_default();
        let (rv, objects) = (list.resource_version, list.objects);
        match self.format {
            Format::Jsonl | Format::Json => out.json_line(&SyncedLine {
                type_: "SYNCED",
                objects,
                resource_version: &rv,
            })?,
            Format::Table => out.line(&format!(
                "SYNCED    {objects} objects at resourceVersion {rv}"
            ))?,
            Format::None => {}
        }
        Ok(Instant::now())
    }
}
