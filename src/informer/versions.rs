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
