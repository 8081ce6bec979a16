//! One informer per (type, resource, namespace, selectors), shared by everyone who asks.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Mutex;

use super::Informer;
use crate::client::{Api, Client};
use crate::reflector::ReflectorOptions;
use crate::{ApiResource, Object, Resource};

type Key = (
    TypeId,
    ApiResource,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Starts one informer on a runtime.
type Starter = Box<dyn Fn(&tokio::runtime::Handle) + Send + Sync>;

/// One informer handed out: the informer (an `Informer<T>`) and how to start it.
struct Entry {
    informer: Box<dyn Any + Send + Sync>,
    start: Starter,
}

/// Hands out shared informers: asking twice for the same kind, namespace and selectors gives the
/// same informer (one watch on the apiserver), whoever asks.
///
/// ```no_run
/// # async fn demo(client: informer::Client) {
/// use informer::{EndpointSlice, informer::InformerFactory};
/// let factory = InformerFactory::new(client);
/// let a = factory.informer::<EndpointSlice>(Some("prod"));
/// let b = factory.informer::<EndpointSlice>(Some("prod"));
/// assert!(std::sync::Arc::ptr_eq(a.store(), b.store()));
/// factory.start();
/// # }
/// ```
pub struct InformerFactory {
    client: Client,
    defaults: ReflectorOptions,
    informers: Mutex<HashMap<Key, Entry>>,
}

impl InformerFactory {
    /// A factory whose informers use `client` and the default reflector options.
    pub fn new(client: Client) -> Self {
        Self::with_options(client, ReflectorOptions::default())
    }

    /// A factory whose informers use `client` and `defaults` (selectors in `defaults` are ignored;
    /// ask with [`informer_with`](Self::informer_with)).
    pub fn with_options(client: Client, defaults: ReflectorOptions) -> Self {
        InformerFactory {
            client,
            defaults,
            informers: Mutex::new(HashMap::new()),
        }
    }

    /// The shared informer of a typed kind, in one namespace or all (`None`).
    pub fn informer<T: Resource + Clone>(&self, namespace: Option<&str>) -> Informer<T> {
        self.informer_with(T::api_resource(), namespace, None, None)
    }

    /// The shared informer of any resource (CRDs, metadata-only views), with selectors.
    pub fn informer_with<T: Object + Clone>(
        &self,
        resource: ApiResource,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Informer<T> {
        let key: Key = (
            TypeId::of::<T>(),
            resource.clone(),
            namespace.map(str::to_owned),
            label_selector.map(str::to_owned),
            field_selector.map(str::to_owned),
        );
        let mut informers = self.informers.lock().unwrap();
        if let Some(existing) = informers.get(&key) {
            return existing
                .informer
                .downcast_ref::<Informer<T>>()
                .expect("keyed by TypeId")
                .clone();
        }
        let api = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        let options = ReflectorOptions {
            label_selector: label_selector.map(str::to_owned),
            field_selector: field_selector.map(str::to_owned),
            ..self.defaults.clone()
        };
        let informer = Informer::new(api, options);
        let starter = informer.clone();
        informers.insert(
            key,
            Entry {
                informer: Box::new(informer.clone()),
                start: Box::new(move |rt| starter.start_on(rt)),
            },
        );
        informer
    }

    /// Starts every informer handed out so far (informers asked for later start when asked to).
    pub fn start(&self) {
        let rt = tokio::runtime::Handle::current();
        for entry in self.informers.lock().unwrap().values() {
            (entry.start)(&rt);
        }
    }

    /// Forgets every informer of `namespace`: asking again builds a new one. An informer nobody
    /// else holds a clone of stops (its last clone drops).
    pub(crate) fn forget_namespace(&self, namespace: &str) {
        let forgotten: Vec<Entry> = {
            let mut informers = self.informers.lock().unwrap();
            let keys: Vec<Key> = informers
                .keys()
                .filter(|k| k.2.as_deref() == Some(namespace))
                .cloned()
                .collect();
            keys.iter().filter_map(|k| informers.remove(k)).collect()
        };
        // Dropped outside the lock: dropping a last clone stops that informer.
        drop(forgotten);
    }
}
