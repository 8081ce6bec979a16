//! `kwatch` as a subprocess, against the simulator and against scripted servers.

#[path = "../support/mod.rs"]
mod support;

mod commands;
mod sync;
