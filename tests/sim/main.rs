//! The embedded apiserver simulator: its wire protocol, faults, churn generator, TLS and
//! authentication, throughput, and the real kubectl as its client.
//!
//! The measured throughput runs are `#[ignore]`d:
//! `cargo test --release --test sim throughput -- --ignored --nocapture`.

#[path = "../support/mod.rs"]
mod support;

mod churn;
mod faults;
mod kubectl;
mod protocol;
mod throughput;
mod tls;
