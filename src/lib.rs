//! # informer
//!
//! A fast, correct local mirror of Kubernetes resources: LIST once, WATCH for changes, keep everything
//! in memory and read from there (client-go calls this an *informer*).
//!
//! Data flows one way through the modules:
//!
//! ```text
//! config -> client (frame -> watch) -> reflector -> fifo -> store + informer (handlers) -> workqueue
//! ```
//!
//! * [`config`]: where the apiserver is and how to authenticate.
//! * [`client`]: HTTP/1.1 and HTTP/2 over rustls; reads (GET, paged LIST, WATCH as
//!   [`client::WatchEvent`]s) and writes. Its wire decoders (framing a watch body into JSON values,
//!   decoding them into events) sit in a module hidden from these docs, for the benches and fuzz
//!   targets.
//! * [`reflector`]: lists and watches for ever, feeding the fifo.
//! * [`fifo`]: the per-key coalescing queue between the reflector and the store (advanced: an
//!   informer runs one for you).
//! * [`store`]: the sharded, indexed local cache.
//! * [`informer`]: shared informers: one reflector, one store, many handlers.
//! * [`discovery`]: service discovery on EndpointSlices ([`ServiceDiscovery`]: versioned
//!   snapshots, subscriptions).
//! * [`workqueue`]: the rate-limited work queue, the worker loop, and controllers fed by informers.
//! * [`leaderelection`]: leader election on a Lease (client-go's), with a fence for the
//!   controller's workers.
//! * [`sharding`]: a shard of a timebertt/kubernetes-controller-sharding ring.
//! * [`model`]: object metadata, typed kinds, dynamic objects, `Status`.
//!
//! The embedded apiserver simulator for tests and demos is the crate `informer-sim` (lib
//! `informer_sim`), a dev-dependency for your tests; the `kwatch` tool is the crate `kwatch`. Both
//! live in this repository's workspace.

#![warn(missing_docs)]

mod blocking;
pub mod client;
pub mod config;
pub mod discovery;
pub mod error;
pub mod fifo;
pub mod informer;
#[doc(hidden)]
pub mod internals;
mod key_hash;
mod keyed_queue;
pub mod leaderelection;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod model;
mod private_file;
pub mod reflector;
mod rng;
pub mod sharding;
pub mod store;
mod thread_pool;
pub mod workqueue;

// The decoders keep their short paths inside the crate (`crate::frame`, `crate::watch`).
use internals::{frame, watch};

// The nouns a user needs, at the root; everything else lives in its stage's module.
pub use client::{Api, Client, ListParams, WatchParams};
pub use config::Config;
pub use discovery::{DiscoveryOptions, ServiceDiscovery};
pub use error::{Error, Result};
pub use fifo::DeletedObject;
pub use informer::{EventHandler, HandlerFns, Informer, InformerFactory};
pub use model::{
    ApiResource, ConfigMap, DynamicObject, EndpointSlice, Endpoints, JsonObject, Namespace, Node,
    Object, ObjectMeta, PartialObjectMetadata, Pod, Resource, Service, Status, StringMap,
};
pub use reflector::ReflectorOptions;
pub use store::Store;
pub use workqueue::WorkQueue;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
