//! Servers that misbehave (issue #15), over real loopback HTTP: scripted faults, silent and dead
//! connections, names that try to reach another path, and authentication failures.

#[path = "../support/mod.rs"]
mod support;

mod auth;
mod liveness;
mod paths;
mod server;
