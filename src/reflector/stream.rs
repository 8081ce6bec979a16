//! The streaming list (`sendInitialEvents=true`, client-go's WL1-WL9): a watch whose initial ADDED
//! events are the list, ended by the bookmark annotated `k8s.io/initial-events-end`, after which
//! the same stream goes on as a normal watch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Object;
use crate::client::{ResponseBody, VersionMatch, WatchParams};
use crate::error::Error;
use crate::fifo::{DeletedObject, Delta, RawDelta};
use crate::watch::{RawEvent, RawObject, WatchEvent, WatchStream};

use super::{CutRetry, EventVersions, ListPlan, ListVersion, Phase, Reflector, State, is_refused};

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
        if !self.fifo.begin_relist() {
            return State::Stopped;
        }
        self.silence_limit = self.silence_limit_of(timeout_seconds);
        State::InitialEvents(Box::new(InitialEvents {
            stream,
            opened: Instant::now(),
            events: 0,
            listed_objects: 0,
            raw_page: Vec::new(),
            page: Vec::new(),
        }))
    }

    /// One step of the `InitialEvents` state (WL3-WL6): reads one event of the streaming list
    /// into its pending page; the bookmark annotated `k8s.io/initial-events-end` completes the
    /// list, and the same stream goes on as a normal watch (`Watching`).
    pub(super) async fn initial_event(&mut self, mut list: Box<InitialEvents<T>>) -> State<T> {
        let page_size = self.options.page_size.max(1) as usize;
        let idle = self.silence_limit;
        let next = match tokio::time::timeout(idle, list.stream.next_raw()).await {
            Ok(n) => n,
            Err(_) => Some(Err(Error::Timeout(format!(
                "streaming list sent nothing for {idle:?}"
            )))),
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
                        list.raw_page.push(o);
                        if list.raw_page.len() >= page_size {
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
                        self.flush_pages(&mut list.raw_page, &mut list.page).await
                            && self.fifo.push_raw(RawDelta::Deleted(o)).await
                    }
                    RawEvent::Decoded(WatchEvent::Deleted(o)) => {
                        list.listed_objects = list.listed_objects.saturating_sub(1);
                        let o = match self.transformed(o) {
                            Ok(o) => Arc::new(o),
                            Err(e) => return self.streaming_failed(e),
                        };
                        self.flush_pages(&mut list.raw_page, &mut list.page).await
                            && self.fifo.push(Delta::Deleted(DeletedObject::Final(o)))
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
    /// with a consistent read; `Invalid`/`BadRequest` (servers without streaming lists) fall back to
    /// LIST, for good; anything else falls back to LIST for this round.
    fn streaming_failed(&mut self, e: Error) -> State<T> {
        self.fail(&e);
        if e.is_expired()
            || e.status()
                .is_some_and(|s| s.is_too_large_resource_version())
        {
            if self.list_version == ListVersion::Consistent {
                return self.backoff_then(State::Relist, &e);
            }
            self.list_version = ListVersion::Consistent;
            return State::Relist;
        }
        if is_refused(&e) || e.http_code() == Some(429) {
            return self.backoff_then(State::Relist, &e);
        }
        if matches!(e.http_code(), Some(400 | 422)) {
            tracing::info!("the server does not support streaming lists; using LIST from now on");
            self.list_plan = ListPlan::Paged;
        } else {
            self.list_plan = ListPlan::PagedOnce;
        }
        State::Relist
    }

    /// Hands the streaming list's pending page (raw or decoded, at most one is non-empty) to the
    /// fifo, waiting while it is full. `false` if the fifo is closed.
    async fn flush_pages(&self, raw: &mut Vec<RawObject>, decoded: &mut Vec<Arc<T>>) -> bool {
        if !raw.is_empty() && !self.fifo.relist_raw_page(std::mem::take(raw)).await {
            return false;
        }
        decoded.is_empty() || self.fifo.relist_page_async(std::mem::take(decoded)).await
    }
}
