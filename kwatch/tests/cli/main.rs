//! `kwatch` as a subprocess, against the simulator and against scripted servers.

/// The one helper of the library's shared test support these tests use (the rest of
/// `tests/support` needs the library's own dev-dependencies), at the path the tests name it by;
/// its own `#![allow(dead_code)]` covers what is unused here.
#[path = "../../../tests/support/raw_server.rs"]
mod raw_server;
mod support {
    pub(crate) use super::raw_server;
}

mod commands;
mod hostile;
mod max_events;
mod sync;
