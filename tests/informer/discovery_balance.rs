//! The example `discovery_balance`'s rolling update, shorter, through real HTTP: tower's p2c
//! balancer over discovery's change stream loses no call and sends no call to a replaced server
//! once it saw the replacement.

#[path = "../../examples/discovery_balance/rolling_update.rs"]
mod rolling_update;

use std::time::Duration;

use rolling_update::Plan;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_under_load_fails_no_call() {
    let plan = Plan {
        servers: 3,
        rounds: 1,
        // One free port on 127.0.0.2.. (the example's 8080 may be taken by a parallel run).
        port: 0,
        tick: Duration::from_millis(2),
        calls_per_tick: 2,
        ready_delay: Duration::from_millis(20),
        settle: Duration::from_millis(40),
        grace: Duration::from_millis(200),
        warm: Duration::from_millis(200),
    };
    let report = rolling_update::run(plan).await.unwrap();
    println!(
        "{} port {} window {} answers {:?}",
        report.json_line(),
        report.port,
        report.calls_to_old_in_propagation,
        report.answers
    );
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.calls_after_update_to_old, 0, "{report:?}");
    // Two changes per replaced server (new ready, old terminating), each seen by the balancer.
    assert_eq!(report.changes_missed, 0, "{report:?}");
    assert_eq!(report.change_to_balancer.len(), 6, "{report:?}");
    assert!(report.calls >= 200, "{report:?}");
    // Every server of the update answered some calls: all six took part.
    assert_eq!(report.answers.len(), 6, "{report:?}");
}
