//! The streaming list (`sendInitialEvents=true`, client-go's WL1-WL9): a watch whose initial ADDED
//! events are the list, ended by the bookmark annotated `k8s.io/initial-events-end`, after which
//! the same stream goes on as a normal watch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Object;
use crate::client::{ResponseBody, VersionMatch, WatchParams};
use crate::error::Error;
use crate::fifo::{DeletedObject, Delta, PAGE_BYTES, RawDelta};
use crate::watch::{RawEvent, RawObject, WatchEvent, WatchStream};

use super::{
    CutRetry, EventVersions, INITIAL_EVENTS_WARNING, ListPlan, ListVersion, MAX_REST_RETRIES,
    Phase, Reflector, State, is_refused, version_gone,
};

/// A streaming list between its opening and its initial-events-end bookmark: the stream, and the
/// list as far as it came (the `InitialEvents` state).
pub(super) struct InitialEvents<T> {
    stream: WatchStream<T, ResponseBody>,
    /// When the stream opened: a stream that ends empty within a second is "ended at once".
    opened: Instant,
    /// Events read so far, bookmarks included; the watch that follows goes on counting.
    events: u64,
    /// Objects the list holds so far: one per ADDED; a MODIFIED during the initial events
    /// changes one already listed, a DELETED removes one (WL3). Counted, not collected.
    listed_objects: u64,
    /// The initial events go to the fifo in pages, raw (decoded there), or decoded here when
    /// the fast path did not take them; one of the two pages is empty at any time, so the
    /// order is kept.
    raw_page: Vec<RawObject>,
    page: Vec<Arc<T>>,
    /// JSON bytes of `raw_page` (stale while it is empty: reset at its first push): a page goes
    /// to the fifo at [`PAGE_BYTES`] even if it is short of the page size.
    raw_page_bytes: usize,
    /// When the stream opened, on the tokio clock: the initial phase's warning and deadline
    /// count from it (WL9).
    started: tokio::time::Instant,
    /// Whether the initial phase has outlasted [`INITIAL_EVENTS_WARNING`] (and was reported).
    progress: InitialProgress,
}

/// How far a streaming list's initial phase is from its limits (WL9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InitialProgress {
    /// Within [`INITIAL_EVENTS_WARNING`] of its opening.
    OnTime,
    /// Past it without the initial-events-end bookmark: reported once; the stream is given up at
    /// [`ReflectorOptions::initial_events_deadline`](super::ReflectorOptions::initial_events_deadline).
    Late,
}

/// Why the wait for a streaming list's next initial event ended early.
enum Overdue {
    /// Nothing at all for the silence limit: a dead stream.
    Silent,
    /// [`INITIAL_EVENTS_WARNING`] passed without the end bookmark.
    Warning,
    /// The initial phase's deadline passed without the end bookmark.
    Deadline,
}

impl<T: Object + Clone> Reflector<T> {
    /// Opens a streaming list (WL1, WL2): a watch from the last seen version (or `""`, see
    /// [`ListVersion`]) that first sends the list as ADDED events. Its events are read in the
    /// `InitialEvents` state ([`initial_event`](Self::initial_event)).
    pub(super) async fn streaming_list(&mut self) -> State<T> {
        let timeout_seconds = self.watch_timeout();
        let rv = match self.list_version {
            ListVersion::Consistent => String::new(),
            ListVersion::LastSeen => self.last_rv.clone(),
        };
        let params = WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            resource_version: Some(rv),
            version_match: Some(VersionMatch::NotOlderThan),
            send_initial_events: Some(true),
            allow_bookmarks: true,
            timeout_seconds: Some(timeout_seconds),
        };
        let stream = match self.api.watch(&params).await {
            Ok(s) => s,
            Err(e) => return self.streaming_failed(e),
        };
        self.health.lock().unwrap().watches += 1;
        self.stream_delivered = false;
        self.retry_after_waits = 0;
        if !self.fifo.begin_relist() {
            return State::Stopped;
        }
        self.set_silence_limit(&stream, timeout_seconds, true);
        State::InitialEvents(Box::new(InitialEvents {
            stream,
            opened: Instant::now(),
            events: 0,
            listed_objects: 0,
            raw_page: Vec::new(),
            page: Vec::new(),
            raw_page_bytes: 0,
            started: tokio::time::Instant::now(),
            progress: InitialProgress::OnTime,
        }))
    }

    /// The next event of the streaming list `list`, or why the wait ended first: silence for
    /// the silence limit, the warning (once), or the initial phase's deadline (WL9).
    async fn next_initial_event(
        &self,
        list: &mut InitialEvents<T>,
    ) -> Result<Option<Result<RawEvent<T>, Error>>, Overdue> {
        use tokio::time::Instant;
        let now = Instant::now();
        let far = now + Duration::from_secs(86400 * 365);
        let silent_at = now.checked_add(self.silence_limit).unwrap_or(far).min(far);
        let deadline = list
            .started
            .checked_add(self.options.initial_events_deadline)
            .unwrap_or(far)
            .min(far);
        let mut wake = silent_at.min(deadline);
        if list.progress == InitialProgress::OnTime {
            wake = wake.min(list.started + INITIAL_EVENTS_WARNING);
        }
        match tokio::time::timeout_at(wake, list.stream.next_raw()).await {
            Ok(next) => Ok(next),
            Err(_) if Instant::now() >= deadline => Err(Overdue::Deadline),
            Err(_) if Instant::now() >= silent_at => Err(Overdue::Silent),
            Err(_) => Err(Overdue::Warning),
        }
    }

    /// One step of the `InitialEvents` state (WL3-WL6): reads one event of the streaming list
    /// into its pending page; the bookmark annotated `k8s.io/initial-events-end` completes the
    /// list, and the same stream goes on as a normal watch (`Watching`).
    ///
    /// A streaming list given up after it handed objects to the fifo makes the next list a
    /// consistent read (`""`): a LIST at `"0"` (the first list's) may be served by a watch cache
    /// that is behind the stream, and would move those objects back to older versions.
    pub(super) async fn initial_event(&mut self, list: Box<InitialEvents<T>>) -> State<T> {
        let next = self.read_initial_event(list).await;
        if self.stream_delivered && matches!(next, State::Relist | State::Backoff { .. }) {
            self.list_version = ListVersion::Consistent;
        }
        next
    }

    /// [`initial_event`](Self::initial_event) but for the version of the list that follows.
    async fn read_initial_event(&mut self, mut list: Box<InitialEvents<T>>) -> State<T> {
        let page_size = self.options.page_size.max(1) as usize;
        let idle = self.silence_limit;
        let next = match self.next_initial_event(&mut list).await {
            Ok(n) => n,
            Err(Overdue::Silent) => Some(Err(Error::Timeout(format!(
                "streaming list sent nothing for {idle:?}"
            )))),
            Err(Overdue::Warning) => {
                // WL9: reported, and waited for still.
                list.progress = InitialProgress::Late;
                self.fail(&Error::Timeout(format!(
                    "the streaming list has not sent its initial-events-end bookmark after {:?} \
                     ({} objects so far); still waiting",
                    INITIAL_EVENTS_WARNING, list.listed_objects
                )));
                return State::InitialEvents(list);
            }
            Err(Overdue::Deadline) => {
                // Given up for a paginated LIST, this round only.
                let deadline = self.options.initial_events_deadline;
                self.fail(&Error::Timeout(format!(
                    "the streaming list sent no initial-events-end bookmark within {deadline:?} \
                     ({} objects so far); listing with pages instead",
                    list.listed_objects
                )));
                self.list_plan = ListPlan::PagedOnce;
                return State::Relist;
            }
        };
        // An object that cannot have a cache key is an event that does not decode.
        let next = match next {
            Some(Ok(event)) => Some(event.check_key().map(|()| event)),
            other => other,
        };
        match next {
            Some(Ok(event)) => {
                list.events += 1;
                self.touch_event();
                let added = matches!(
                    event,
                    RawEvent::Added(_) | RawEvent::Decoded(WatchEvent::Added(_))
                );
                list.listed_objects += u64::from(added);
                let flushed = match event {
                    RawEvent::Added(o) | RawEvent::Modified(o) => {
                        let mut ok = self.flush_pages(&mut Vec::new(), &mut list.page).await;
                        if list.raw_page.is_empty() {
                            list.raw_page_bytes = 0;
                        }
                        list.raw_page_bytes += o.bytes().len();
                        list.raw_page.push(o);
                        if list.raw_page.len() >= page_size || list.raw_page_bytes >= PAGE_BYTES {
                            ok &= self.flush_pages(&mut list.raw_page, &mut list.page).await;
                        }
                        ok
                    }
                    RawEvent::Decoded(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                        let mut ok = self.flush_pages(&mut list.raw_page, &mut Vec::new()).await;
                        match self.transformed(o) {
                            Ok(o) => list.page.push(Arc::new(o)),
                            Err(e) => return self.streaming_failed(e),
                        }
                        if list.page.len() >= page_size {
                            ok &= self.flush_pages(&mut list.raw_page, &mut list.page).await;
                        }
                        ok
                    }
                    // Keep the order: what was listed before the delete goes first.
                    RawEvent::Deleted(o) => {
                        list.listed_objects = list.listed_objects.saturating_sub(1);
                        self.stream_delivered = true;
                        self.flush_pages(&mut list.raw_page, &mut list.page).await
                            && self.fifo.push(RawDelta::Deleted(o)).await
                    }
                    RawEvent::Decoded(WatchEvent::Deleted(o)) => {
                        list.listed_objects = list.listed_objects.saturating_sub(1);
                        let o = match self.transformed(o) {
                            Ok(o) => Arc::new(o),
                            Err(e) => return self.streaming_failed(e),
                        };
                        self.stream_delivered = true;
                        self.flush_pages(&mut list.raw_page, &mut list.page).await
                            && self
                                .fifo
                                .push(Delta::Deleted(DeletedObject::Final(o)))
                                .await
                    }
                    RawEvent::Decoded(WatchEvent::Bookmark(b)) if b.is_initial_events_end() => {
                        if !self.flush_pages(&mut list.raw_page, &mut list.page).await {
                            return State::Stopped;
                        }
                        // Before the list can complete in the fifo (see `list`).
                        self.listed(b.resource_version.clone(), list.listed_objects);
                        if !self.fifo.end_relist() || !self.fifo.bookmark(&b.resource_version) {
                            return State::Stopped;
                        }
                        // The first sync: the events that follow wait in the socket until the
                        // consumer has processed the list, as they would before a LIST's watch
                        // opens. Reading them now would only take CPU from the list's decode
                        // (measured: sync 3x slower under a flood on 2 cores).
                        if !self.fifo.has_synced() && !self.fifo.wait_synced().await {
                            return State::Stopped;
                        }
                        // WL5: the same stream goes on as a normal watch whose events all
                        // carry versions in order (client-go's propagateRVFromStart).
                        self.event_versions = EventVersions::InOrder;
                        self.set_phase(Phase::Watching);
                        let InitialEvents {
                            stream,
                            opened,
                            events,
                            ..
                        } = *list;
                        return State::Watching {
                            stream,
                            opened,
                            events,
                        };
                    }
                    RawEvent::Decoded(WatchEvent::Bookmark(_)) => true,
                    RawEvent::Decoded(WatchEvent::Error(status)) => {
                        return self.streaming_failed(Error::from_status(status));
                    }
                };
                if !flushed {
                    return State::Stopped;
                }
                State::InitialEvents(list)
            }
            Some(Err(e)) => {
                // A cut stream before the bookmark: try again at once (WL6), once; unless
                // nothing at all came, or the stream was garbled, or the one immediate retry
                // was used already: a server that always cuts must not be hammered.
                self.fail(&e);
                if matches!(e, Error::Decode { .. } | Error::FrameTooLarge { .. })
                    || list.events == 0
                    || self.cut_retry == CutRetry::Used
                {
                    return self.backoff_then(State::Relist, &e);
                }
                self.cut_retry = CutRetry::Used;
                State::Relist
            }
            None => {
                if list.events == 0 && list.opened.elapsed() < Duration::from_secs(1) {
                    // WL6 + R17: a very short empty stream; the server probably does not
                    // stream lists the way we asked. Fall back to LIST for this round.
                    let e =
                        Error::EndedTooSoon("streaming list ended at once with no events".into());
                    self.fail(&e);
                    self.list_plan = ListPlan::PagedOnce;
                    return State::Relist;
                }
                // WL6: closed before the bookmark; a new streaming list at once, once.
                let e = Error::Protocol(
                    "the streaming list ended before its initial-events-end bookmark".into(),
                );
                self.fail(&e);
                if self.cut_retry == CutRetry::Used {
                    return self.backoff_then(State::Relist, &e);
                }
                self.cut_retry = CutRetry::Used;
                State::Relist
            }
        }
    }

    /// WL7: 429 and refused connections retry after a backoff; an expired version retries at once
    /// with a consistent read; a 5xx with a `Retry-After` waits it (as a LIST or a watch does:
    /// the backoff step or the Retry-After, whichever is longer, up to the cap) and streams again,
    /// up to [`MAX_REST_RETRIES`] times in a row, as client-go's REST client retries it
    /// before its reflector sees the error; anything else, `Invalid`/`BadRequest` (a server
    /// without streaming lists, or one apiserver of several that has them off) included, falls
    /// back to LIST for this round: the next relist streams again (WL8, as client-go does), so
    /// one refusal never turns streaming lists off for the reflector's life.
    ///
    /// Routine, not failures (logged, not reported): the apiserver's refusal of the streaming
    /// list (`Invalid`/`BadRequest`, what every relist meets on a server before 1.27), and a
    /// version found gone for the first time (retried at once with a consistent read).
    fn streaming_failed(&mut self, e: Error) -> State<T> {
        if version_gone(&e) && self.list_version == ListVersion::LastSeen {
            tracing::debug!(error = %e, "the streaming list's version is gone; a consistent one at once");
            self.list_version = ListVersion::Consistent;
            return State::Relist;
        }
        if e.status().is_some_and(|s| matches!(s.code, 400 | 422)) {
            tracing::info!(
                error = %e,
                "the server refused a streaming list (no WatchList); using LIST for this relist"
            );
            self.list_plan = ListPlan::PagedOnce;
            return State::Relist;
        }
        self.fail(&e);
        if version_gone(&e) || is_refused(&e) || e.http_code() == Some(429) {
            return self.backoff_then(State::Relist, &e);
        }
        let asks_to_wait =
            e.retry_after_seconds().is_some() && matches!(e.http_code(), Some(500..=599));
        if asks_to_wait && self.retry_after_waits < MAX_REST_RETRIES {
            self.retry_after_waits += 1;
            return self.backoff_then(State::Relist, &e);
        }
        self.retry_after_waits = 0;
        self.list_plan = ListPlan::PagedOnce;
        State::Relist
    }

    /// Hands the streaming list's pending page (raw or decoded, at most one is non-empty) to the
    /// fifo, waiting while it is full. `false` if the fifo is closed.
    async fn flush_pages(&mut self, raw: &mut Vec<RawObject>, decoded: &mut Vec<Arc<T>>) -> bool {
        self.stream_delivered |= !raw.is_empty() || !decoded.is_empty();
        if !raw.is_empty() && !self.fifo.relist_page(std::mem::take(raw)).await {
            return false;
        }
        decoded.is_empty() || self.fifo.relist_page(std::mem::take(decoded)).await
    }
}
