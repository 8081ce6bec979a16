//! Runs many seeded fault scenarios (random writes, cut watches, 410s, 429/5xx, stalled error
//! bodies, a proxy's plain-text 503 with Retry-After, compactions, streaming lists without their end
//! bookmark, late handlers) against the embedded simulator and prints how many diverged: the store
//! or a handler's view not equal to the server at quiescence, or an invalid notification sequence.
//!
//! Run: `cargo run --release --example convergence -- --scenarios 2000 --seed 1`

#[path = "../tests/support/convergence.rs"]
mod convergence;

use std::time::{Duration, Instant};

use informer_sim::Simulator;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count = arg("--scenarios", 1000);
    let seed = arg("--seed", 1);
    let sim = Simulator::builder()
        .seed(seed)
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .expect("start the simulator");
    let started = Instant::now();
    let mut divergences = 0;
    for s in seed * 1_000_000..seed * 1_000_000 + count {
        let one = Instant::now();
        if let Err(e) = convergence::scenario(&sim, s).await {
            divergences += 1;
            eprintln!("{e}");
        }
        if one.elapsed() > Duration::from_secs(10) {
            eprintln!("scenario {s} took {:.1} s", one.elapsed().as_secs_f64());
        }
        let done = s - seed * 1_000_000 + 1;
        if done.is_multiple_of(250) {
            eprintln!(
                "{done} scenarios, {divergences} divergences, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{count} scenarios from seed {seed} in {:.1} s: {divergences} divergences",
        started.elapsed().as_secs_f64()
    );
    std::process::exit(if divergences == 0 { 0 } else { 1 });
}
