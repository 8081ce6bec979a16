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
    informers: Mutex<HashMap<Key, Box<dyn Any + Send + Sync>>>,
    starters: Mutex<Vec<Starter>>,
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
            starters: Mutex::new(Vec::new()),
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
        informers.insert(key, Box::new(informer.clone()));
        let starter = informer.clone();
        self.starters
            .lock()
            .unwrap()
            .push(Box::new(move |rt| starter.start_on(rt)));
        informer
    }

    /// Starts every informer handed out so far (informers asked for later start when asked to).
    pub fn start(&self) {
        let rt = tokio::runtime::Handle::current();
        for start in self.starters.lock().unwrap().iter() {
            start(&rt);
        }
    }
}
