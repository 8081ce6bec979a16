//! The tracked Services: an entry per `(namespace, service)` somebody asked about, holding its
//! cells. At most [`max_tracked_services`] entries and [`max_ports_per_service`] cells each: past
//! a bound the oldest without a subscriber goes (else the oldest), and its subscriptions end.
//!
//! Invariant: an entry is marked `evicted` under its own lock when it is forgotten, after it left
//! the `services` map; its cells leave the read path and its Pod references go with it.
//!
//! [`max_tracked_services`]: crate::discovery::DiscoveryOptions::max_tracked_services
//! [`max_ports_per_service`]: crate::discovery::DiscoveryOptions::max_ports_per_service

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Cache, Cell, ServiceEntry, ServiceInner};

impl Cache {
    /// The entry of a Service, created on first use; creating one past `max_tracked_services`
    /// forgets the oldest entry without subscribers (else the oldest).
    pub(super) fn service_entry(&self, namespace: &str, service: &str) -> Arc<ServiceEntry> {
        let key = (namespace.to_owned(), service.to_owned());
        let (entry, victim) = {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = services.get(&key) {
                return e.clone();
            }
            let victim = if services.len() >= self.options.max_tracked_services.max(1) {
                let oldest = |evictable: &dyn Fn(&ServiceEntry) -> bool| {
                    services
                        .iter()
                        .filter(|(_, e)| evictable(e))
                        .min_by_key(|(_, e)| e.created)
                        .map(|(k, _)| k.clone())
                };
                let key = oldest(&|e| !e.has_subscribers()).or_else(|| oldest(&|_| true));
                key.and_then(|k| services.remove(&k))
            } else {
                None
            };
            let entry = Arc::new(ServiceEntry {
                namespace: namespace.to_owned(),
                name: service.to_owned(),
                // Relaxed: only a unique, increasing number is needed (compared under this lock).
                created: self.next_seq.fetch_add(1, Ordering::Relaxed),
                state: Mutex::new(ServiceInner {
                    revision: 0,
                    cells: Vec::new(),
                    pods: BTreeSet::new(),
                    evicted: false,
                }),
            });
            services.insert(key, entry.clone());
            (entry, victim)
        };
        if let Some(victim) = victim {
            // After the services lock is released (never a Service's lock inside it for long).
            self.forget_entry_state(&victim);
        }
        entry
    }

    /// Removes `entry` from the tracked Services (if it is still there) and forgets its state.
    pub(super) fn forget_entry(&self, entry: &Arc<ServiceEntry>) {
        {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (entry.namespace.clone(), entry.name.clone());
            if services.get(&key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
                services.remove(&key);
            }
        }
        self.forget_entry_state(entry);
    }

    /// Marks a Service entry that is no longer tracked as evicted and drops its cells (their
    /// subscriptions end) and Pod references.
    pub(super) fn forget_entry_state(&self, entry: &ServiceEntry) {
        let mut inner = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        inner.evicted = true;
        let cells = std::mem::take(&mut inner.cells);
        self.forget_cells(&cells);
        let pods = std::mem::take(&mut inner.pods);
        self.update_pod_refs(&entry.namespace, &entry.name, &pods, &BTreeSet::new());
    }

    /// Removes cells from the read path. Their subscribers' streams end (the senders drop).
    pub(super) fn forget_cells(&self, cells: &[Arc<Cell>]) {
        let mut table = self.cells.write().unwrap_or_else(PoisonError::into_inner);
        for cell in cells {
            if let Ok(found) = table.find_entry(cell.hash, |c| Arc::ptr_eq(c, cell)) {
                found.remove();
            }
        }
    }

    /// Namespaces with a Service somebody subscribed to.
    pub(super) fn subscribed_namespaces(&self) -> HashSet<String> {
        let entries: Vec<Arc<ServiceEntry>> = self
            .services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        entries
            .iter()
            .filter(|e| e.has_subscribers())
            .map(|e| e.namespace.clone())
            .collect()
    }
}
