//! The wire decoders under [`Api::watch`](crate::Api::watch) and the informer, public for this
//! repository's benches, fuzz targets, simulator and `kwatch` only: hidden from the docs, outside
//! any stability promise, and nothing an application needs.
//!
//! * [`frame`]: cuts a watch body into JSON values, however the bytes arrive.
//! * [`watch`]: decodes frames into typed or raw events.
//!
//! What a user meets of them is re-exported where it is used: [`WatchEvent`](crate::client::WatchEvent),
//! [`Bookmark`](crate::client::Bookmark) and [`WatchStream`](crate::client::WatchStream) in
//! [`client`](crate::client).

// The files stay where their stage's are (`src/frame/`, `src/watch/`, ARCHITECTURE.md); only the
// public path goes through here.
#[path = "frame/mod.rs"]
pub mod frame;
#[path = "watch/mod.rs"]
pub mod watch;
