//! Every write of `Api` against the simulator: the scenario the real apiserver suite runs too
//! (`tests/support/writes.rs`).

use informer::{Client, Config};
use informer_sim::Simulator;

use crate::support::writes;

#[tokio::test]
async fn every_write_on_a_lean_kind() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::lean_kind_writes(&client, "default").await;
}

#[tokio::test]
async fn a_finalizer_holds_an_object_until_cleanup() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::finalizer_flow(&client, "default").await;
}
