//! Helpers shared by every test binary, included by each with
//! `#[path = "../support/mod.rs"] mod support;`. Each binary uses a different part.
#![allow(dead_code, unused_macros)]

/// Temporary folders, test certificates and a small HTTPS server checking credentials.
pub mod config;
/// A handler that checks notification sequences, and seeded fault scenarios against the simulator
/// (also used by `examples/convergence.rs`).
pub mod convergence;
/// The example operator as processes, and the scenario its tests run on the simulator and the
/// real apiserver.
pub mod operator;
/// A raw HTTP/1.1 client over `TcpStream`, so status lines, headers and chunk framing are visible.
pub mod raw_client;
/// Real apiserver captures and a raw HTTP/1.1 server that replays or scripts replies.
pub mod raw_server;
/// A TCP relay that delays, swallows or refuses what it carries, for partitions on a paused clock.
pub mod relay;
/// The real kube-apiserver's coordinates and helpers (tests skip without `REAL_APISERVER_URL`);
/// its `real_or_skip!` macro is visible after `mod support;` (with `#[macro_use]`).
#[macro_use]
pub mod real_apiserver;
/// Reply builders for scripted list/watch servers: lists, watch streams, events, `Status` bodies.
pub mod scripted;
/// A fence token whose holding a test switches off.
pub mod tokens;
/// Every write of `Api` as one scenario for any server (simulator and real apiserver alike).
pub mod writes;
