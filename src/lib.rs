//! # informer
//!
//! A fast, correct local mirror of Kubernetes resources: LIST once, WATCH for changes, keep everything
//! in memory and read from there (client-go calls this an *informer*).
//!
//! Data flows one way through the modules:
//!
//! ```text
//! client (HTTP, auth) -> frame (watch-stream framing) -> watch (typed events) -> ...
//! ```

pub mod fifo;
pub mod model;
pub mod store;

pub use fifo::{DeletedObject, Delta, DeltaFifo, FifoConsumer};
pub use model::*;
pub use store::Store;
