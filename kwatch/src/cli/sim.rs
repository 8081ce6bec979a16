//! `kwatch sim`: the simulator in the foreground, until Ctrl-C or the process is killed.
//!
//! The first line on stdout is `listening on URL` (flushed at once, so a parent process can read
//! it); the next one names a kubeconfig written for it, so kubectl can be pointed at it too.
//! `--churn` runs the demo's workload generator on it (3 services x 5 pods, 20 steps/s).

use std::io::Write;

use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};

use super::args::SimArgs;
use super::{CliError, CliResult};

pub async fn run(args: SimArgs) -> CliResult {
    let mut builder = Simulator::builder().addr(args.listen).tls(args.tls);
    if let Some(token) = &args.token {
        builder = builder.token(token.clone());
    }
    let sim = builder
        .start()
        .await
        .map_err(|e| CliError::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let kubeconfig =
        std::env::temp_dir().join(format!("kwatch-sim-{}.kubeconfig", sim.addr().port()));
    // It holds the token: 0600, written under a unique temporary name then renamed.
    sim.write_kubeconfig(&kubeconfig)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", sim.url())?;
    writeln!(stdout, "kubeconfig {}", kubeconfig.display())?;
    if let Some(ca) = sim.ca_pem() {
        let ca_path = std::env::temp_dir().join(format!("kwatch-sim-{}.ca.pem", sim.addr().port()));
        std::fs::write(&ca_path, ca)?;
        writeln!(stdout, "certificate-authority {}", ca_path.display())?;
    }
    stdout.flush()?;
    drop(stdout);
    let churn = if args.churn {
        let churn = Churn::new(
            sim.api(),
            ChurnConfig {
                services: 3,
                pods_per_service: 5,
                ..Default::default()
            },
        )
        .map_err(|e| CliError::Runtime(format!("creating the workload: {e:?}")))?;
        Some(churn.run(20.0))
    } else {
        None
    };
    let _ = tokio::signal::ctrl_c().await;
    drop(churn);
    let _ = std::fs::remove_file(&kubeconfig);
    sim.shutdown().await;
    Ok(())
}
