//! Reading one's own writes: wait until the informer's store has seen a write this process made
//! (the idea of KEP-5647), so that a reconcile that just wrote does not act on its own stale cache.
//!
//! A write through [`Api`](crate::Api) returns the object as stored, with its new
//! `metadata.resourceVersion`; [`Informer::wait_for_version`] completes once the store holds that
//! object at that version or newer, or once the whole store is known to match the server at that
//! version or later (then the object may have changed again or been deleted since: the store
//! shows what followed the write, never what preceded it).
//!
//! resourceVersions are compared as numbers: the apiserver's are etcd revisions, one counter for
//! all objects, and Kubernetes 1.35 made that comparison part of the API (KEP-5504). Where either
//! version is not a number (a server that is not etcd-backed, an aggregated API), only an equal
//! version counts, and the store-wide rule does not apply: the wait then completes only when the
//! store holds exactly the version written, and times out if a newer write overtook it.
//!
//! Invariant (the wake-up): the processor, after applying a pop, issues a `SeqCst` fence and then
//! reads the number of waiters; a waiter increments that number, registers for the next
//! notification, issues a `SeqCst` fence and then reads the store. Of two fences one comes first,
//! so either the processor sees the waiter (and notifies it) or the waiter sees what the processor
//! applied. With no waiter, a pop costs the fence and one relaxed load.

use crate::model::Metadata;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::time::Duration;

use super::Informer;
use crate::Object;
use crate::error::{Error, Result};

/// True when `have` is `want` or newer: numerically when both are numbers, else only if equal.
fn at_least(have: &str, want: &str) -> bool {
    match (have.parse::<u64>(), want.parse::<u64>()) {
        (Ok(have), Ok(want)) => have >= want,
        _ => have == want,
    }
}

/// Counts a waiter for as long as it lives, so a cancelled wait is uncounted.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // Relaxed: the count only decides whether the processor notifies; a late decrement costs
        // one spurious notification.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Object> Informer<T> {
    /// Waits until the store has seen `namespace/name` at `resource_version` or newer, at most
    /// `timeout`; a timeout is an [`Error::Timeout`] saying what the store holds. Cluster-scoped
    /// objects have namespace `""`.
    ///
    /// "Seen" means: the store holds the object at that version or a newer one, or the whole
    /// store is known to match the server at that version or later (the object may have changed
    /// again or been deleted since: the store shows what followed the write, never what preceded
    /// it). Versions compare as numbers (etcd revisions; KEP-5504 made that part of the API in
    /// 1.35); where one is not a number, only the exact version counts, and a wait overtaken by a
    /// newer write times out.
    ///
    /// ```no_run
    /// # async fn demo(api: informer::Api<informer::ConfigMap>, cms: informer::Informer<informer::ConfigMap>)
    /// # -> informer::Result<()> {
    /// use std::time::Duration;
    /// use informer::client::{Patch, PatchParams};
    /// let patch = serde_json::json!({"data": {"phase": "ready"}});
    /// let written = api.patch("settings", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    /// cms.wait_for_version("default", "settings", &written.metadata.resource_version, Duration::from_secs(5))
    ///     .await?;
    /// // The store now shows the patch (or something newer).
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_version(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<()> {
        if resource_version.is_empty() {
            // A dry run's answer, or an object never written: no version will ever match.
            return Err(Error::InvalidRequest(format!(
                "waiting for {namespace}/{name} at an empty resourceVersion (a dry run's answer?)"
            )));
        }
        let seen = || {
            self.shared
                .store
                .get(namespace, name)
                .is_some_and(|o| at_least(o.meta().resource_version(), resource_version))
                || at_least(
                    &self.shared.store.last_applied_resource_version(),
                    resource_version,
                ) && resource_version.parse::<u64>().is_ok()
        };
        self.wait_until(seen, timeout).await.map_err(|waited| {
            let held = self
                .shared
                .store
                .get(namespace, name)
                .map(|o| format!("resourceVersion {}", o.meta().resource_version()))
                .unwrap_or_else(|| "no such object".to_owned());
            Error::Timeout(format!(
                "the informer's store did not see {namespace}/{name} at resourceVersion \
                 {resource_version} within {waited:?} (it holds {held}; the store matches the \
                 server at {:?})",
                self.shared.store.last_applied_resource_version()
            ))
        })
    }

    /// Waits until the store holds no `namespace/name` (after a delete), at most `timeout`.
    ///
    /// ```no_run
    /// # async fn demo(cms: informer::Informer<informer::ConfigMap>) -> informer::Result<()> {
    /// cms.wait_for_absence("default", "settings", std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_absence(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<()> {
        let gone = || self.shared.store.get(namespace, name).is_none();
        self.wait_until(gone, timeout).await.map_err(|waited| {
            Error::Timeout(format!(
                "the informer's store still holds {namespace}/{name} after {waited:?}"
            ))
        })
    }

    /// Lists the resource again, now, and waits until the store holds that list (and whatever
    /// the watch brought after it), at most `timeout`: for when the cache must be known to be as
    /// new as the server at some moment, such as after a network partition that may have hidden
    /// changes from the watch (a watch cut by one is watched again from where it was, which
    /// loses nothing, but one that hangs unnoticed keeps the store where it was). The list is
    /// one that *started* after the call; handlers get what it changed, as after any relist. A
    /// timeout is an [`Error::Timeout`] (the informer not started, or the server unreachable:
    /// its health says which).
    ///
    /// A fenced [`Controller`](crate::workqueue::Controller) does this for each of its informers
    /// whenever its fence opens.
    ///
    /// ```no_run
    /// # async fn demo(cms: informer::Informer<informer::ConfigMap>) -> informer::Result<()> {
    /// cms.relist(std::time::Duration::from_secs(30)).await?;
    /// // The store is at least as new as the server was when relist was called.
    /// # Ok(()) }
    /// ```
    pub async fn relist(&self, timeout: Duration) -> Result<()> {
        let generation = self.ask_relist();
        self.wait_for_list(|list| list.serves >= generation, timeout)
            .await
            .map_err(|waited| {
                Error::Timeout(format!(
                    "relist: no list in the store after {waited:?} (the reflector is {:?})",
                    self.shared.health.lock().unwrap().phase
                ))
            })
    }

    /// Asks for a relist unless the last completed list started at `since` or later (a fenced
    /// controller's catch-up when its fence opens); returns what
    /// [`wait_listed_since`](Self::wait_listed_since) waits for. Not async, so that a caller
    /// catching several informers up asks all of them before it waits for any.
    pub(crate) fn relist_unless_listed_since(&self, since: std::time::Instant) -> u64 {
        match self.shared.relists.last_completed() {
            Some(list) if list.started >= since => u64::MAX,
            _ => self.ask_relist(),
        }
    }

    /// Asks the reflector for a list that starts after this call and wakes it if it is watching
    /// (through the fifo: see the reflector's `relist` module); returns the request's generation.
    fn ask_relist(&self) -> u64 {
        let generation = self.shared.relists.request();
        self.shared.fifo.interrupt_producer();
        generation
    }

    /// Waits until the store holds a list that started at `since` or later, or the one `asked`
    /// for ([`relist_unless_listed_since`](Self::relist_unless_listed_since)).
    pub(crate) async fn wait_listed_since(&self, since: std::time::Instant, asked: u64) {
        let waited = self
            .wait_for_list(
                |list| list.started >= since || list.serves >= asked,
                Duration::MAX, // tokio waits for ever when the deadline overflows
            )
            .await;
        debug_assert!(waited.is_ok(), "no timeout");
    }

    /// Waits until the latest completed list satisfies `which` and the store has applied it.
    async fn wait_for_list(
        &self,
        which: impl Fn(&crate::reflector::CompletedList) -> bool,
        timeout: Duration,
    ) -> std::result::Result<(), Duration> {
        let relists = &self.shared.relists;
        let store = &self.shared.store;
        self.wait_until(
            || {
                relists.last_completed().is_some_and(|list| {
                    which(&list)
                        && at_least(
                            &store.last_applied_resource_version(),
                            &list.resource_version,
                        )
                })
            },
            timeout,
        )
        .await
    }

    /// Completes once `condition` holds, looked at after each pop the processor applies; `Err`
    /// with the time waited when `timeout` passes first.
    async fn wait_until(
        &self,
        condition: impl Fn() -> bool,
        timeout: Duration,
    ) -> std::result::Result<(), Duration> {
        let shared = &self.shared;
        shared.version_waiters.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&shared.version_waiters);
        let wait = async {
            loop {
                let mut notified = pin!(shared.pop_applied.notified());
                notified.as_mut().enable();
                // SeqCst: pairs with the processor's fence (module docs).
                fence(Ordering::SeqCst);
                if condition() {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::at_least;

    #[test]
    fn versions_compare_as_numbers_else_only_equal() {
        assert!(at_least("10", "9"));
        assert!(at_least("10", "10"));
        assert!(!at_least("9", "10"));
        assert!(at_least("abc", "abc"));
        assert!(!at_least("abd", "abc"));
        assert!(!at_least("", "1"));
    }
}
