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

pub mod model;
#[cfg(feature = "sim")]
pub mod sim;

pub use model::*;
