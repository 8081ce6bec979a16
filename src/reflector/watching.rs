//! The watch: opening it from the last seen resourceVersion (R13, R19), reading its events into the
//! fifo (R14-R16), and what its end or failure leads to (R17, R18, R22).

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};

use crate::Object;
use crate::client::{ResponseBody, WatchParams};
use crate::error::Error;
use crate::fifo::{DeletedObject, Delta, RawDelta};
use crate::watch::{RawEvent, WatchEvent, WatchStream};

use super::{
    EventVersions, Handled, MAX_REST_RETRIES, Phase, Reflector, Silence, State, is_refused,
    rest_client_retries,
};

impl<T: Object + Clone> Reflector<T> {
    /// One step of an open watch: the next event (or the fifo's decode failure, or the watch's
    /// silence) and what it leads to.
    pub(super) async fn watching(
        &mut self,
        mut stream: WatchStream<T, ResponseBody>,
        opened: Instant,
        events: u64,
    ) -> State<T> {
        let idle = self.silence_limit;
        // The fifo decodes events later, when their key is handed out: a failure there
        // means the store missed an event, and the relist must not wait for the next one.
        // `select` polls its first future first: a decode failure wins over an event
        // that is ready at the same time.
        // A relist asked for from outside (the `relist` module) wakes this wait too, through
        // the fifo (`DeltaFifo::interrupt_producer`): one wait per event, not two.
        let next = {
            let interrupted = pin!(self.fifo.decode_failed());
            let event = pin!(tokio::time::timeout(idle, stream.next_raw()));
            match select(interrupted, event).await {
                Either::Left(((), _)) => None,
                Either::Right((next, _)) => Some(next),
            }
        };
        let Some(next) = next else {
            return match self.fifo.take_decode_error() {
                Some(e) => {
                    self.fail(&e);
                    self.backoff_then(State::Relist, &e)
                }
                None if self.relist_pending() => {
                    tracing::debug!("a relist was asked for; relisting");
                    State::Relist
                }
                None => State::Watching {
                    stream,
                    opened,
                    events,
                },
            };
        };
        match next {
            Err(_) => {
                // R24: watched again from the last seen version, on a new connection (this one
                // is dropped with the stream): the version is still good (a 410 would say
                // otherwise). A silence that a quiet resource explains is routine; one past the
                // server's own end of the watch is a hung stream, a failure.
                match self.silence {
                    Silence::MayBeQuiet => tracing::debug!(
                        silent_for = ?idle,
                        resource_version = %self.last_rv,
                        "the watch sent nothing (a quiet resource gets no bookmark); watching \
                         again from the same version"
                    ),
                    Silence::Hung => self.fail(&Error::Timeout(format!(
                        "watch sent nothing (no event, no bookmark) for {idle:?}, past its own \
                         timeout; treating it as dead"
                    ))),
                }
                State::Watch
            }
            Ok(Some(Ok(event))) => match event.check_key() {
                // An object that cannot have a cache key is an event that does not decode.
                Err(e) => self.watch_failed(e, opened, events),
                Ok(()) => match self.handle_raw_event(event).await {
                    Handled::Continue => State::Watching {
                        stream,
                        opened,
                        events: events + 1,
                    },
                    Handled::Then(next) => next,
                },
            },
            Ok(Some(Err(e))) => self.watch_failed(e, opened, events),
            Ok(None) => self.watch_ended(opened, events),
        }
    }

    /// Opens a watch from the last seen version (R13, R19).
    pub(super) async fn open_watch(&mut self) -> State<T> {
        tracing::debug!(resource_version = %self.last_rv, "watching");
        let timeout_seconds = self.watch_timeout();
        let params = WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            resource_version: Some(self.last_rv.clone()),
            allow_bookmarks: self.options.bookmarks,
            timeout_seconds: Some(timeout_seconds),
            ..Default::default()
        };
        match self.api.watch(&params).await {
            Ok(stream) => {
                self.watch_open_retries = 0;
                self.set_silence_limit(&stream, timeout_seconds, self.options.bookmarks);
                self.event_versions = match self.last_rv.as_str() {
                    "" | "0" => EventVersions::SyntheticAddsFirst,
                    _ => EventVersions::InOrder,
                };
                self.set_phase(Phase::Watching);
                self.health.lock().unwrap().watches += 1;
                State::Watching {
                    stream,
                    opened: Instant::now(),
                    events: 0,
                }
            }
            Err(e) => {
                if is_refused(&e) || e.http_code() == Some(429) {
                    // R19: the version is still good; try the watch again after a while.
                    self.fail(&e);
                    self.backoff_then(State::Watch, &e)
                } else if rest_client_retries(&e) && self.watch_open_retries < MAX_REST_RETRIES {
                    // R23: client-go's REST client tries such a watch again itself; the version
                    // is not in question, so a relist would cost the server a LIST for nothing.
                    // Its reflector's error handler never sees these retries: routine here too
                    // (the module docs), until the last one fails.
                    tracing::info!(
                        resource = %self.api.resource().plural,
                        error = %e,
                        retry = self.watch_open_retries + 1,
                        "the watch could not be opened; watching again from the same version"
                    );
                    self.watch_open_retries += 1;
                    self.backoff_then(State::Watch, &e)
                } else {
                    self.fail(&e);
                    self.watch_open_retries = 0;
                    self.backoff_then(State::Relist, &e)
                }
            }
        }
    }

    /// Queues one watch event. Object events go to the fifo as raw JSON, decoded there only if they
    /// survive coalescing; the push waits while the fifo is full, so a slow consumer slows the
    /// reading of the watch (back-pressure) instead of growing memory. A raw object that the fifo
    /// could not decode means the store missed an event: the `Watching` step relists (R22).
    async fn handle_raw_event(&mut self, event: RawEvent<T>) -> Handled<T> {
        let delta = match event {
            RawEvent::Added(o) => RawDelta::Added(o),
            RawEvent::Modified(o) => RawDelta::Modified(o),
            RawEvent::Deleted(o) => RawDelta::Deleted(o),
            RawEvent::Decoded(event) => return self.handle_event(event).await,
        };
        // R14, as in `handle_event`: synthetic ADDED events (of a watch from "" or "0") come in
        // no version order; the version advances from the first event of another type on.
        if !matches!(delta, RawDelta::Added(_)) {
            self.event_versions = EventVersions::InOrder;
        }
        let rv = delta.object().resource_version();
        if !rv.is_empty() && self.event_versions == EventVersions::InOrder {
            self.last_rv.clear();
            self.last_rv.push_str(rv);
        }
        if !self.fifo.push(delta).await {
            return Handled::Then(State::Stopped);
        }
        self.event_taken();
        Handled::Continue
    }

    /// Records a watch event in the health snapshot: one lock, and the version copied into a
    /// buffer that is reused.
    fn event_taken(&self) {
        let mut h = self.health.lock().unwrap();
        h.events += 1;
        h.last_event = Some(Instant::now());
        h.resource_version.clone_from(&self.last_rv);
        h.consecutive_failures = 0;
    }

    /// Queues one decoded event (R15, R16). Per event: one health lock, and the version copied into
    /// buffers that are reused (no allocation beyond the object's own `Arc`).
    async fn handle_event(&mut self, event: WatchEvent<T>) -> Handled<T> {
        let event = match event {
            WatchEvent::Added(o) => self.transformed(o).map(WatchEvent::Added),
            WatchEvent::Modified(o) => self.transformed(o).map(WatchEvent::Modified),
            WatchEvent::Deleted(o) => self.transformed(o).map(WatchEvent::Deleted),
            other => Ok(other),
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                // The transform panicked: the store would miss this object; relist, as for an
                // object that does not decode.
                self.fail(&e);
                return Handled::Then(self.backoff_then(State::Relist, &e));
            }
        };
        let delta = match event {
            WatchEvent::Added(o) => Some(Delta::Added(Arc::new(o))),
            WatchEvent::Modified(o) => Some(Delta::Modified(Arc::new(o))),
            WatchEvent::Deleted(o) => Some(Delta::Deleted(DeletedObject::Final(Arc::new(o)))),
            WatchEvent::Bookmark(b) => {
                self.event_versions = EventVersions::InOrder;
                if !b.resource_version.is_empty() {
                    self.last_rv = b.resource_version;
                    // Events carry their version to the fifo in their object; a bookmark's comes
                    // alone.
                    if !self.fifo.bookmark(&self.last_rv) {
                        return Handled::Then(State::Stopped);
                    }
                }
                None
            }
            WatchEvent::Error(status) => {
                self.touch_event();
                let e = Error::from_status(status);
                // R18: 429 (the server is busy; the version is still good) watches again from the
                // same version after a backoff, without relisting. An expired watch relists (from
                // the last version, which a LIST may still serve) after one backoff step; so does
                // any other in-stream error. The expiry is routine (the watch cache's window
                // moved on): logged, not reported; the relist shows in `Health::lists`.
                let next = if e.is_expired() {
                    tracing::debug!(error = %e, "the watch expired; relisting");
                    State::Relist
                } else if e.http_code() == Some(429) {
                    self.fail(&e);
                    State::Watch
                } else {
                    self.fail(&e);
                    State::Relist
                };
                return Handled::Then(self.backoff_then(next, &e));
            }
        };
        if let Some(d) = delta {
            // R14: synthetic ADDED events (of a watch from "" or "0") come in no version order;
            // the version advances from the first event of another type on.
            if !matches!(d, Delta::Added(_)) {
                self.event_versions = EventVersions::InOrder;
            }
            let rv = d.resource_version();
            if !rv.is_empty() && self.event_versions == EventVersions::InOrder {
                self.last_rv.clear();
                self.last_rv.push_str(rv);
            }
            if !self.fifo.push(d).await {
                return Handled::Then(State::Stopped);
            }
        }
        self.event_taken();
        Handled::Continue
    }

    /// The body ended cleanly (R17, R18): watch again from the last version, at once, unless the
    /// watch was very short and empty, which would spin.
    fn watch_ended(&mut self, opened: Instant, events: u64) -> State<T> {
        if events == 0 && opened.elapsed() < Duration::from_secs(1) {
            let e = Error::EndedTooSoon(
                "very short watch: ended in under a second with no events".into(),
            );
            self.fail(&e);
            return self.backoff_then(State::Watch, &e);
        }
        State::Watch
    }

    /// The stream broke (R22): a cut connection re-watches from the last version; an undecodable or
    /// oversized event means the cache may have missed something, so relist.
    fn watch_failed(&mut self, e: Error, opened: Instant, events: u64) -> State<T> {
        self.fail(&e);
        match e {
            Error::Decode { .. } | Error::FrameTooLarge { .. } => {
                self.backoff_then(State::Relist, &e)
            }
            _ => self.watch_ended(opened, events),
        }
    }
}
