//! The informers of each namespace asked about (one [`Watch`] per namespace, or one for the
//! cluster with [`WatchScope::ClusterWide`]): created on first use, at most
//! [`max_watched_namespaces`] of them (past it the oldest namespace without a subscriber is
//! forgotten, else the oldest), the sync waits, and the first full computation of a namespace
//! once its informers synced.
//!
//! Invariants: only [`Cache::watch`] creates a namespace's informers, and only the read path calls
//! it; a forgotten namespace's `evicted` flag is set before its Services are forgotten, and its
//! first computation, if not run yet, never runs.
//!
//! [`max_watched_namespaces`]: crate::discovery::DiscoveryOptions::max_watched_namespaces

use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use futures_util::future::{Either, select};

use super::{Cache, ServiceEntry, ServiceKey};
use crate::discovery::WatchScope;
use crate::discovery::informers::Watch;

impl Cache {
    /// The key of the [`Watch`] serving `namespace`.
    fn scope_key(&self, namespace: &str) -> Option<String> {
        match self.options.scope {
            WatchScope::PerNamespace => Some(namespace.to_owned()),
            WatchScope::ClusterWide => None,
        }
    }

    /// The informers serving `namespace` if they exist; never creates them.
    pub(super) fn current_watch(&self, namespace: &str) -> Option<Arc<Watch>> {
        self.watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&self.scope_key(namespace))
            .cloned()
    }

    /// The informers serving `namespace`, created, wired and started on first use; creating one
    /// past `max_watched_namespaces` forgets the oldest namespace without subscribers (else the
    /// oldest).
    pub(super) fn watch(&self, namespace: &str) -> Arc<Watch> {
        let key = self.scope_key(namespace);
        if let Some(w) = self
            .watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return w.clone();
        }
        // Taken before the watches lock, which is never held with the services lock.
        let subscribed = self.subscribed_namespaces();
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = watches.get(&key) {
            return w.clone();
        }
        // Creating the informers spawns threads, which can fail (and panic) under resource limits:
        // catch that here, release the lock, then go on panicking, so that the map is not poisoned
        // and the next call tries again.
        let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Watch::new(
                &self.factory,
                self.owns_factory,
                &self.options,
                key.as_deref(),
                // Relaxed: only a unique, increasing number is needed (compared under this lock).
                self.next_seq.fetch_add(1, Ordering::Relaxed),
                &self.me,
                &self.runtime,
            )
        }));
        let watch = match created {
            Ok(watch) => watch,
            Err(panic) => {
                drop(watches);
                std::panic::resume_unwind(panic);
            }
        };
        let victim = if watches.len() >= self.options.max_watched_namespaces.max(1) {
            let oldest = |evictable: &dyn Fn(&str) -> bool| {
                watches
                    .iter()
                    .filter_map(|(k, w)| Some((k.as_deref()?, w)))
                    .filter(|(ns, _)| evictable(ns))
                    .min_by_key(|(_, w)| w.created)
                    .map(|(ns, _)| ns.to_owned())
            };
            let ns = oldest(&|ns| !subscribed.contains(ns)).or_else(|| oldest(&|_| true));
            ns.and_then(|ns| Some((ns.clone(), watches.remove(&Some(ns))?)))
        } else {
            None
        };
        watches.insert(key.clone(), watch.clone());
        drop(watches);
        if let Some((ns, victim)) = victim {
            self.forget_namespace(&ns, &victim);
        }
        let me = self.me.clone();
        let w = watch.clone();
        self.runtime.spawn(async move {
            // Synced, or evicted first (its informers may then never sync).
            let evicted = async {
                loop {
                    // Created before the check: a notification after it is not lost.
                    let notified = w.evicted_notify.notified();
                    // Relaxed: the flag is set before `notify_waiters`, whose release/acquire
                    // pair orders it before this load.
                    if w.evicted.load(Ordering::Relaxed) {
                        return;
                    }
                    notified.await;
                }
            };
            let mut evicted = pin!(evicted);
            if let Either::Right(_) = select(pin!(w.synced()), evicted.as_mut()).await {
                return;
            }
            let recompute_all = || {
                let Some(cache) = me.upgrade() else { return };
                let entries: Vec<Arc<ServiceEntry>> = {
                    let services = cache
                        .services
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    services
                        .values()
                        .filter(|e| key.is_none() || key.as_deref() == Some(e.namespace.as_str()))
                        .cloned()
                        .collect()
                };
                for e in entries {
                    cache.recompute(&e);
                }
            };
            // Before the full computation: events handled from now on recompute themselves, and
            // the ones handled before are already in the stores the computation reads.
            // SeqCst: see `Watch::computing`.
            w.computing.store(true, Ordering::SeqCst);
            recompute_all();
            // SeqCst: see `Watch::computed`.
            w.computed.store(true, Ordering::SeqCst);
            w.computed_notify.notify_waiters();
            // Services were refused (403), so the namespace is served from its endpoint objects
            // alone. Should the Service informer sync later (RBAC granted), every Service is
            // computed again with it: its handler's adds reach only the Services that exist.
            if w.services_refused.get().is_some()
                && let Either::Left(_) =
                    select(pin!(w.services_handler_synced()), evicted.as_mut()).await
            {
                recompute_all();
            }
        });
        watch
    }

    /// Forgets an evicted namespace: its handlers, its Services (their subscriptions end), their
    /// cells and Pod references, its slice sequence numbers, and (when this cache owns the
    /// factory) its informers. Asking about the namespace again starts over.
    pub(super) fn forget_namespace(&self, namespace: &str, watch: &Watch) {
        // Relaxed: a stop flag for the watch's first-computation task, read after the
        // notification below (whose release/acquire pair orders it); nothing else goes through it.
        watch.evicted.store(true, Ordering::Relaxed);
        watch.evicted_notify.notify_waiters();
        let unregister = std::mem::take(
            &mut *watch
                .unregister
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for remove in unregister {
            remove();
        }
        let entries: Vec<Arc<ServiceEntry>> = {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<ServiceKey> = services
                .keys()
                .filter(|(ns, _)| ns == namespace)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| services.remove(k)).collect()
        };
        for entry in entries {
            self.forget_entry_state(&entry);
        }
        let prefix = format!("{namespace}/");
        self.slice_seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| !key.starts_with(&prefix));
        if self.owns_factory {
            self.factory.forget_namespace(namespace);
        }
    }

    /// Whether the informers serving `namespace` synced (starts them on first use).
    pub(crate) fn has_synced(&self, namespace: &str) -> bool {
        self.watch(namespace).has_synced()
    }

    /// Completes once the informers serving `namespace` have synced.
    pub(crate) async fn synced(&self, namespace: &str) {
        self.watch(namespace).synced().await
    }

    /// Waits, until `deadline` at most, for the first full computation of `namespace`; returns
    /// whether it ran.
    pub(crate) async fn wait_first_compute(
        &self,
        namespace: &str,
        deadline: tokio::time::Instant,
    ) -> bool {
        let watch = self.watch(namespace);
        loop {
            let notified = watch.computed_notify.notified();
            // SeqCst: see `Watch::computed`.
            if watch.computed.load(Ordering::SeqCst) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // SeqCst: see `Watch::computed`.
                return watch.computed.load(Ordering::SeqCst);
            }
        }
    }
}
