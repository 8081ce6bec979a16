//! The example operator (`examples/operator`) as two processes against the real apiserver, in a
//! namespace of its own, with the server's kubeconfig (`REAL_APISERVER_KUBECONFIG`): the scenario
//! of tests/operator.rs (tests/support/operator.rs). The server has no controller-manager, so the
//! operator's own cleanup is what removes ConfigMaps. `widgets.example.com` is cluster-wide: on a
//! freshly started server the two replicas race to create it; on one that ran this before, both
//! get 409 AlreadyExists, which the operator takes as success too. The replicas run with client-go's
//! leader election timings (LeaseDuration 15 s, RetryPeriod 2 s), so the takeover after the
//! leader's SIGKILL takes 15-20 s, within the issue's 25 s.
//!
//! Needs the example built (`cargo test` builds it; alone: `cargo build --example operator`).

use crate::support::config::TempDir;
use crate::support::operator::{Setup, scenario};
use crate::support::real_apiserver::{bounded, namespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_of_the_operator_do_everything_the_issue_asks() {
    let real = real_or_skip!("two_replicas_of_the_operator_do_everything_the_issue_asks");
    bounded(240, async {
        let client = real.client();
        let dir = TempDir::new("operator-real");
        let setup = Setup {
            kubeconfig: real.kubeconfig.clone().into(),
            namespace: namespace(&client, "operator").await,
            dir: dir.path().to_owned(),
            // client-go's timings, as in a cluster: the takeover must still be within 25 s.
            short_lease: false,
        };
        scenario(&client, &setup).await;
    })
    .await;
}
