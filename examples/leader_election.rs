//! Leader election on a Lease: run several of these against one apiserver and watch the
//! leadership move when the leader is killed (taken over within LeaseDuration + RetryPeriod,
//! 17 s with the defaults) or stopped (released on SIGTERM or Ctrl-C, taken within RetryPeriod).
//!
//! Run: `cargo run --release --example leader_election -- --server URL [--namespace NS]
//! --lease NAME --identity ID [--token TOKEN] [--ca CA_FILE]`
//!
//! against `kwatch sim` (`--server http://127.0.0.1:8080`) or a real apiserver (its URL, a bearer
//! token and the CA file that signed its certificate). Prints one JSON line per change:
//!
//! ```text
//! {"event":"new_leader","identity":"b","leader":"a","transitions":0}
//! {"event":"started_leading","identity":"b","leader":"b","transitions":1}
//! {"event":"stopped_leading","identity":"b","leader":"b","transitions":1}
//! ```

use std::time::Duration;

use informer::config::{Auth, Secret, parse_certificates};
use informer::leaderelection::{LeaderElectionConfig, LeaderElector, LeadershipEvent};
use informer::{Client, Config};
use serde_json::json;

struct Args {
    server: String,
    namespace: String,
    lease: String,
    identity: String,
    token: Option<String>,
    ca: Option<String>,
}

const USAGE: &str = "usage: leader_election --server URL [--namespace NS] --lease NAME \
                     --identity ID [--token TOKEN] [--ca CA_FILE]";

fn args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut server, mut namespace, mut lease, mut identity, mut token, mut ca) =
        (None, "default".to_string(), None, None, None, None);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--server" => server = Some(value),
            "--namespace" => namespace = value,
            "--lease" => lease = Some(value),
            "--identity" => identity = Some(value),
            "--token" => token = Some(value),
            "--ca" => ca = Some(value),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(Args {
        server: server.ok_or(USAGE)?,
        namespace,
        lease: lease.ok_or(USAGE)?,
        identity: identity.ok_or(USAGE)?,
        token,
        ca,
    })
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => drop(tokio::signal::ctrl_c().await),
        }
    }
    #[cfg(not(unix))]
    drop(tokio::signal::ctrl_c().await);
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let mut config = Config::new(args.server.parse()?);
    if let Some(token) = &args.token {
        config.auth = Auth::Bearer(Secret::new(token.as_str()));
    }
    if let Some(ca) = &args.ca {
        config.tls.root_certs = parse_certificates(&std::fs::read(ca)?)?;
    }
    // Each attempt is bounded by the elector; a request should not wait on a dead socket longer.
    config.open_timeout = Duration::from_secs(5);
    let mut elector = LeaderElector::new(
        Client::new(config)?,
        &args.namespace,
        &args.lease,
        &args.identity,
        LeaderElectionConfig::default(),
    )?;
    let mut events = elector.events();
    let run = tokio::spawn(elector.run(terminated()));

    let (mut leader, mut transitions) = (String::new(), 0);
    while let Some(event) = events.recv().await {
        let name = match event {
            LeadershipEvent::StartedLeading(token) => {
                (leader, transitions) = (token.holder, token.transitions);
                "started_leading"
            }
            LeadershipEvent::StoppedLeading => "stopped_leading",
            LeadershipEvent::NewLeader {
                holder,
                transitions: n,
            } => {
                (leader, transitions) = (holder, n);
                "new_leader"
            }
        };
        let line = json!({"event": name, "identity": args.identity, "leader": leader,
                          "transitions": transitions});
        println!("{line}");
    }
    // The stream ends when the elector has returned (released the Lease, if it held it).
    run.await?;
    Ok(())
}
