//! The example operator (`examples/operator`) as two processes against the simulator: the CRD
//! race, server-side applied ConfigMaps and status, spec changes, foreign edits, cleanup through
//! the finalizer (also after no replica ran), a takeover after the leader's SIGKILL, the Lease
//! released on SIGTERM, `/metrics`. The same scenario runs against a real apiserver in
//! tests/real_apiserver/operator.rs.
//!
//! Needs the example built (`cargo test` builds it; alone: `cargo build --example operator &&
//! cargo test --test operator`).

#[macro_use]
#[path = "support/mod.rs"]
mod support;

use informer::{Client, Config};
use support::config::TempDir;
use support::operator::{Setup, scenario};
use support::real_apiserver::bounded;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_of_the_operator_do_everything_the_issue_asks_on_the_simulator() {
    bounded(240, async {
        let sim = informer_sim::Simulator::start().await.unwrap();
        let dir = TempDir::new("operator");
        let kubeconfig = dir.path().join("sim.kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
        let setup = Setup {
            kubeconfig,
            namespace: "default".into(),
            dir: dir.path().to_owned(),
            short_lease: true,
        };
        scenario(&client, &setup).await;
        sim.shutdown().await;
    })
    .await;
}
