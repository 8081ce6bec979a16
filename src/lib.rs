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

pub mod client;
pub mod config;
pub mod model;

pub use model::*;
pub mod error;
pub mod frame;

pub use error::{Error, Result};
pub mod watch;

pub use client::{Api, Client, ListParams, ObjectList, Pager, VersionMatch, WatchParams};
pub use config::{Auth, Config, Identity, Secret, TlsConfig};
