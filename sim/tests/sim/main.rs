//! The embedded apiserver simulator: its wire protocol, faults, churn generator, TLS and
//! authentication, throughput, and the real kubectl as its client.
//!
//! The measured throughput runs are `#[ignore]`d:
//! `cargo test --release --test sim throughput -- --ignored --nocapture`.

/// The one helper of the library's shared test support these tests use (the rest of
/// `tests/support` needs the library's own dev-dependencies), at the path the tests name it by;
/// its own `#![allow(dead_code)]` covers what is unused here.
#[path = "../../../tests/support/raw_client.rs"]
mod raw_client;
mod support {
    pub(crate) use super::raw_client;
}

mod churn;
mod faults;
mod kubectl;
mod protocol;
mod throughput;
mod tls;
mod writes;
