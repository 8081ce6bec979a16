//! One informer per (type, resource, namespace, selectors, transform), shared by everyone who asks
//! (client-go's `SharedInformerFactory`).
//!
//! Invariants: the factory builds its informers with the same builder as [`Informer::new`] (so a
//! transform, the selectors and the stamping of `JsonObject`s and `DynamicObject`s apply alike), and two requests
//! share an informer exactly when their keys are equal: same object type, resource, namespace
//! (none for a cluster-scoped resource), effective label and field selectors, and the same
//! transform (the same `Arc`, compared by address; the entry keeps it alive so the address is never
//! reused while the key exists).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Mutex;

use super::Informer;
use super::dynamic::api_for;
use crate::client::Client;
use crate::fifo::Transform;
use crate::model::JsonObject;
use crate::reflector::ReflectorOptions;
use crate::{ApiResource, Object, Resource};

/// What makes two requests share one informer (see the module's invariants).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    object: TypeId,
    resource: ApiResource,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    /// The transform's address, if any.
    transform: Option<usize>,
}

/// Starts one informer on a runtime.
type Starter = Box<dyn Fn(&tokio::runtime::Handle) + Send + Sync>;

/// One informer handed out: the informer (an `Informer<T>`), how to start it, and its transform
/// (kept so that the address in its key stays its own).
struct Entry {
    informer: Box<dyn Any + Send + Sync>,
    start: Starter,
    _transform: Option<Box<dyn Any + Send + Sync>>,
}

/// What a shared informer watches and how its objects are shaped, for
/// [`InformerFactory::informer_with`]: a resource, a namespace, selectors and a transform.
///
/// A selector left unset is the factory's default (the one in the options given to
/// [`InformerFactory::with_options`]); one set here replaces it.
///
/// ```
/// use std::sync::Arc;
/// use informer::{ConfigMap, Resource, informer::InformerRequest};
/// let request = InformerRequest::<ConfigMap>::new(ConfigMap::api_resource())
///     .namespace(Some("prod"))
///     .label_selector("app=web")
///     .transform(Arc::new(|mut cm: ConfigMap| {
///         cm.metadata.managed_fields = None;
///         cm
///     }));
/// # let _ = request;
/// ```
pub struct InformerRequest<T: Object> {
    resource: ApiResource,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    transform: Option<Transform<T>>,
}

impl<T: Object> InformerRequest<T> {
    /// `resource` in every namespace, with the factory's selectors and no transform.
    pub fn new(resource: ApiResource) -> Self {
        InformerRequest {
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
            transform: None,
        }
    }

    /// In one namespace (`Some`) or all (`None`); ignored for a cluster-scoped resource.
    pub fn namespace(mut self, namespace: Option<&str>) -> Self {
        self.namespace = namespace.map(str::to_owned);
        self
    }

    /// Only objects whose labels match (`labelSelector`), instead of the factory's default.
    pub fn label_selector(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects whose fields match (`fieldSelector`), instead of the factory's default.
    pub fn field_selector(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Applies `transform` to every object once, before it is stored. Requests share an informer
    /// only with the same `Arc`: a request with another transform gets an informer (and a watch)
    /// of its own, never objects shaped by someone else's transform.
    pub fn transform(mut self, transform: Transform<T>) -> Self {
        self.transform = Some(transform);
        self
    }
}

/// Hands out shared informers: asking twice for the same kind, namespace, selectors and transform
/// gives the same informer (one watch on the apiserver), whoever asks. Its informers are built
/// like [`Informer::new`]'s, so selectors, a transform and the `apiVersion`/`kind` stamping of
/// dynamic objects apply the same.
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

    /// A factory whose informers use `client` and `defaults`, selectors included: they apply to
    /// every informer of the factory whose request sets none (client-go's `WithTweakListOptions`).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{ConfigMap, InformerFactory, reflector::ReflectorOptions};
    /// let options = ReflectorOptions { label_selector: Some("team=web".into()), ..Default::default() };
    /// let factory = InformerFactory::with_options(client, options);
    /// let web = factory.informer::<ConfigMap>(None); // only ConfigMaps labelled team=web
    /// # let _ = web;
    /// # }
    /// ```
    pub fn with_options(client: Client, defaults: ReflectorOptions) -> Self {
        InformerFactory {
            client,
            defaults,
            informers: Mutex::new(HashMap::new()),
        }
    }

    /// The shared informer of a typed kind, in one namespace or all (`None`), with the factory's
    /// selectors.
    pub fn informer<T: Resource + Clone>(&self, namespace: Option<&str>) -> Informer<T> {
        self.informer_with(InformerRequest::new(T::api_resource()).namespace(namespace))
    }

    /// The shared informer of any resource in one namespace or all (client-go's dynamic factory
    /// `ForResource`), as [`JsonObject`]s stamped with `apiVersion` and `kind` like
    /// [`Informer::dynamic`]'s. For selectors or a transform, use
    /// [`informer_with`](Self::informer_with) with `JsonObject` (or `DynamicObject`): it stamps
    /// them too.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::InformerFactory;
    /// let widgets = client.resolve_resource("widgets.example.com").await?;
    /// let factory = InformerFactory::new(client);
    /// let inf = factory.dynamic(&widgets, Some("default"));
    /// factory.start();
    /// # let _ = inf;
    /// # Ok(()) }
    /// ```
    pub fn dynamic(&self, resource: &ApiResource, namespace: Option<&str>) -> Informer<JsonObject> {
        self.informer_with(InformerRequest::new(resource.clone()).namespace(namespace))
    }

    /// The shared informer of any resource (CRDs, metadata-only views) described by `request`:
    /// selectors, a transform. It is built (once per key, see [`InformerRequest`]) with the
    /// factory's options, the request's selectors replacing the default ones.
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{EndpointSlice, InformerFactory, Resource, informer::InformerRequest};
    /// let factory = InformerFactory::new(client);
    /// let web = factory.informer_with(
    ///     InformerRequest::<EndpointSlice>::new(EndpointSlice::api_resource())
    ///         .namespace(Some("prod"))
    ///         .label_selector("kubernetes.io/service-name=web"),
    /// );
    /// # let _ = web;
    /// # }
    /// ```
    pub fn informer_with<T: Object + Clone>(&self, request: InformerRequest<T>) -> Informer<T> {
        let InformerRequest {
            resource,
            namespace,
            label_selector,
            field_selector,
            transform,
        } = request;
        let options = ReflectorOptions {
            label_selector: label_selector.or_else(|| self.defaults.label_selector.clone()),
            field_selector: field_selector.or_else(|| self.defaults.field_selector.clone()),
            ..self.defaults.clone()
        };
        let key = Key {
            object: TypeId::of::<T>(),
            namespace: namespace.filter(|_| resource.namespaced),
            resource,
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            transform: transform
                .as_ref()
                .map(|t| std::sync::Arc::as_ptr(t).cast::<()>() as usize),
        };
        let mut informers = self.informers.lock().unwrap();
        if let Some(existing) = informers.get(&key) {
            return existing
                .informer
                .downcast_ref::<Informer<T>>()
                .expect("keyed by TypeId")
                .clone();
        }
        let api = api_for(
            self.client.clone(),
            key.resource.clone(),
            key.namespace.as_deref(),
        );
        let informer = Informer::build(api, options, transform.clone());
        let starter = informer.clone();
        informers.insert(
            key,
            Entry {
                informer: Box::new(informer.clone()),
                start: Box::new(move |rt| starter.start_on(rt)),
                _transform: transform.map(|t| Box::new(t) as Box<dyn Any + Send + Sync>),
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
                .filter(|k| k.namespace.as_deref() == Some(namespace))
                .cloned()
                .collect();
            keys.iter().filter_map(|k| informers.remove(k)).collect()
        };
        // Dropped outside the lock: dropping a last clone stops that informer.
        drop(forgotten);
    }
}
