//! Recomputation: what the informers' handlers report ([`Changes`]) and recomputing a Service's
//! cells from the informers' stores.
//!
//! Invariants: a Service is recomputed under its own lock, so its revisions go out in the order
//! they were computed, and only when its namespace's first full computation has begun
//! (`Watch::computing`; the argument that no event falls between is at that field). A
//! recomputation publishes only the cells whose content changed, all with one new revision; with
//! Pod metadata on, `pod_refs` holds exactly the Pods the last computation of each Service
//! referenced (or targets not cached yet), so a Pod's change recomputes just those Services.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use super::{Cache, ServiceEntry, ServiceInner, ServiceKey};
use crate::discovery::compute::{Source, compute, snapshot};
use crate::discovery::informers::{Changes, Watch};
use crate::discovery::merge::{self, MergeContext, ObservedSlice};
use crate::discovery::snapshot::{Freshness, InstanceMetadata};
use crate::discovery::{SERVICE_INDEX, SERVICE_NAME_LABEL};
use crate::model::EndpointSlice;
use crate::store::Ref;

impl Changes for Cache {
    fn slice_changed(&self, slice: &EndpointSlice, present: bool) {
        let key = slice.metadata.key();
        {
            let mut seqs = self
                .slice_seq
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if present {
                // Relaxed: only a unique, increasing number is needed (compared under `slice_seq`'s lock).
                seqs.insert(key, self.next_seq.fetch_add(1, Ordering::Relaxed));
            } else {
                seqs.remove(&key);
            }
        }
        if let Some(svc) = slice.metadata.labels.get(SERVICE_NAME_LABEL) {
            self.service_changed(&slice.metadata.namespace, svc);
        }
    }

    fn pod_changed(&self, pod_key: String) {
        let services: Vec<ServiceKey> = match self
            .pod_refs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pod_key)
        {
            Some(s) => s.iter().cloned().collect(),
            None => return,
        };
        for (ns, svc) in services {
            self.service_changed(&ns, &svc);
        }
    }

    /// Recomputes a tracked Service (nothing for Services nobody asked about).
    fn service_changed(&self, namespace: &str, service: &str) {
        let entry = self
            .services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), service.to_owned()))
            .cloned();
        if let Some(entry) = entry {
            self.recompute(&entry);
        }
    }
}

impl Cache {
    /// Recomputes a Service if its namespace's first computation has begun.
    pub(super) fn recompute(&self, entry: &ServiceEntry) {
        // Never `self.watch`: a handler or the first computation of a namespace that was just
        // forgotten must not start its informers again (and evict a namespace in use for it).
        let Some(watch) = self.current_watch(&entry.namespace) else {
            return;
        };
        // SeqCst: see `Watch::computing`.
        if !watch.computing.load(Ordering::SeqCst) {
            return;
        }
        let mut inner = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.recompute_locked(entry, &mut inner, &watch);
    }

    /// Recomputes every cell of a Service from the informer stores and publishes the ones whose
    /// content changed, all with one new revision. Runs under the Service's lock, so revisions are
    /// published in the order they were computed.
    pub(super) fn recompute_locked(
        &self,
        entry: &ServiceEntry,
        inner: &mut ServiceInner,
        watch: &Watch,
    ) {
        // Relaxed: a counter read for display; it publishes no other memory.
        self.recomputes.fetch_add(1, Ordering::Relaxed);
        let (ns, name) = (entry.namespace.as_str(), entry.name.as_str());
        // An `Arc`, not a `Ref`: the merge below runs over every cell, and a `Ref` held that long
        // would keep whatever its shard drops meanwhile (see `store::Ref`).
        // Not before the Service informer synced: refused (403), its empty store would make
        // every Service absent; the endpoint objects alone say then (see `Watch`).
        let service = watch
            .services
            .as_ref()
            .filter(|_| watch.services_synced())
            .map(|i| i.store().get(ns, name).map(|s| Ref::to_arc(&s)));
        let source = self.read_source(watch, ns, name);
        let pods = watch.pods.as_ref().map(|p| p.store().clone());
        let pod_lookup = |pns: &str, pname: &str| -> Option<Arc<InstanceMetadata>> {
            let store = pods.as_ref()?;
            store
                .get(pns, pname)
                .map(|p| Arc::new(merge::instance_metadata(&p)))
        };
        let mut updates = Vec::new();
        let mut referenced = BTreeSet::new();
        for cell in &inner.cells {
            let ctx = MergeContext {
                options: &self.options,
                namespace: ns,
                port_name: &cell.port,
                service: service.as_ref().and_then(|s| s.as_deref()),
                pod: &pod_lookup,
            };
            let merged = compute(&source, service.as_ref().map(|s| s.is_some()), &ctx);
            referenced.extend(merged.instances.iter().filter_map(|i| i.pod.clone()));
            let current = cell.current();
            let candidate = snapshot(ns, name, &cell.port, 0, merged, Freshness::Live);
            if !candidate.same_content(&current) || current.freshness != Freshness::Live {
                updates.push((cell.clone(), candidate));
            }
        }
        if self.options.pod_metadata {
            // Every Pod the slices target, including those not cached yet (so their arrival
            // triggers a recomputation).
            referenced.extend(source.target_pods(ns));
            self.update_pod_refs(ns, name, &inner.pods, &referenced);
            inner.pods = referenced;
        }
        if updates.is_empty() {
            return;
        }
        inner.revision += 1;
        for (cell, mut snap) in updates {
            snap.revision = inner.revision;
            cell.tx.send_replace(Arc::new(snap));
            // Relaxed: a counter read for display; it publishes no other memory.
            self.published.fetch_add(1, Ordering::Relaxed);
        }
        // Relaxed: a hint for the saver, which reads the cells through their channels; a late flag
        // only delays a save by one interval.
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// The endpoint objects of a Service, from the informer stores.
    fn read_source(&self, watch: &Watch, ns: &str, name: &str) -> Source {
        if let Some(inf) = &watch.endpoints {
            let endpoints = inf.store().get(ns, name);
            return Source::Endpoints(endpoints.map(|e| Ref::to_arc(&e)));
        }
        let Some(inf) = watch.slice_informer() else {
            return Source::Slices(Vec::new());
        };
        let slices = inf
            .store()
            .by_index(SERVICE_INDEX, &format!("{ns}/{name}"))
            .unwrap_or_default();
        let seqs = self
            .slice_seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Source::Slices(
            slices
                .into_iter()
                .map(|slice| {
                    let seq = seqs.get(&slice.metadata.key()).copied().unwrap_or(0);
                    ObservedSlice { slice, seq }
                })
                .collect(),
        )
    }

    /// Moves the Service `ns/name` from the Pods it referenced `before` to those of `after`.
    pub(super) fn update_pod_refs(
        &self,
        ns: &str,
        name: &str,
        before: &BTreeSet<String>,
        after: &BTreeSet<String>,
    ) {
        let key = (ns.to_owned(), name.to_owned());
        let mut refs = self.pod_refs.lock().unwrap_or_else(PoisonError::into_inner);
        for gone in before.difference(after) {
            if let Some(set) = refs.get_mut(gone) {
                set.remove(&key);
                if set.is_empty() {
                    refs.remove(gone);
                }
            }
        }
        for new in after.difference(before) {
            refs.entry(new.clone()).or_default().insert(key.clone());
        }
    }
}
