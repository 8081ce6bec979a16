//! An RPC client balancing over a Service's endpoints through a Deployment-like rolling update,
//! with no failed call: discovery's endpoint change stream as tower's `Discover`, tower's p2c
//! balancer, three HTTP servers on 127.0.0.2:8080, 127.0.0.3:8080 and 127.0.0.4:8080 published
//! as the endpoints of an EndpointSlice of the embedded simulator, replaced one by one (three
//! rolling updates in a row, new servers on 127.0.0.5 onwards). Ends with one JSON line:
//! `{"calls":N,"failed":F,"calls_after_update_to_old":K,"change_to_balancer_ms_p50":..,"change_to_balancer_ms_p99":..}`
//! (definitions in `rolling_update.rs`; details on stderr).
//!
//! `cargo run --release --example discovery_balance`

mod rolling_update;

use std::time::Duration;

use rolling_update::Plan;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plan = Plan {
        servers: 3,
        rounds: 3,
        port: 8080,
        tick: Duration::from_millis(1),
        calls_per_tick: 2,
        ready_delay: Duration::from_millis(50),
        settle: Duration::from_millis(100),
        grace: Duration::from_millis(500),
        warm: Duration::from_millis(500),
    };
    let report = rolling_update::run(plan).await?;
    let mut answers: Vec<_> = report.answers.iter().collect();
    answers.sort();
    eprintln!(
        "port {}; {} usable-set changes measured ({} missed); calls to an old server between its terminating write and the balancer seeing it: {}",
        report.port,
        report.change_to_balancer.len(),
        report.changes_missed,
        report.calls_to_old_in_propagation,
    );
    eprintln!("answers per server: {answers:?}");
    println!("{}", report.json_line());
    Ok(())
}
