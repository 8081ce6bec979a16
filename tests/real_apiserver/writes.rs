//! Every write of `Api` against the real apiserver: the same scenario the simulator runs
//! (`tests/support/writes.rs`), so the two are held to one set of answers.

use crate::support::real_apiserver::*;
use crate::support::writes;

#[tokio::test]
async fn every_write_on_a_lean_kind() {
    let real = real_or_skip!("every_write_on_a_lean_kind");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "writes").await;
        writes::lean_kind_writes(&client, &ns).await;
    })
    .await;
}

#[tokio::test]
async fn a_finalizer_holds_an_object_until_cleanup() {
    let real = real_or_skip!("a_finalizer_holds_an_object_until_cleanup");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "finalizer").await;
        writes::finalizer_flow(&client, &ns).await;
    })
    .await;
}
