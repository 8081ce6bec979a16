//! `kwatch`, the command-line tool: watch, list and discover Kubernetes objects through an informer,
//! or run the embedded apiserver simulator and a self-contained demo on it.
//!
//! | subcommand | module |
//! |---|---|
//! | `demo` | [`demo`]: simulator + churn + faults + informers + discovery, live view, summary |
//! | `sim` | [`sim`]: the simulator in the foreground |
//! | `watch` | [`watch`]: every handler notification of an informer |
//! | `get` | [`get`]: a listing from a synced informer |
//! | `instances` | [`instances`]: a service's endpoints, as the library's discovery snapshots |
//!
//! Shared parts: [`args`] (command line), [`connect`] (where the cluster is), [`resolve`]
//! (resource names through the server's discovery documents), [`output`] (tables and JSON lines),
//! [`latency`] (a small latency histogram).
//!
//! Exit status: 0 on success (`--help` included), 1 on a runtime error (one line on stderr), 2 on a
//! usage error (one line on stderr, pointing at `kwatch --help` or the subcommand's `--help`).

mod args;
mod connect;
mod demo;
mod get;
mod instances;
mod latency;
mod output;
mod resolve;
mod sim;
mod watch;

use std::fmt;
use std::process::ExitCode;

use args::{Command, Invocation};

/// Why kwatch stops with a non-zero status.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong (exit status 2).
    Usage(String),
    /// The command line of a subcommand is wrong (exit status 2; the hint names its help).
    SubcommandUsage(&'static str, String),
    /// Something failed while running (exit status 1).
    Runtime(String),
}

impl CliError {
    fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) | CliError::SubcommandUsage(..) => ExitCode::from(2),
            CliError::Runtime(_) => ExitCode::from(1),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) => write!(f, "{m} (see 'kwatch --help')"),
            CliError::SubcommandUsage(sub, m) => write!(f, "{m} (see 'kwatch {sub} --help')"),
            CliError::Runtime(m) => f.write_str(m),
        }
    }
}

impl From<informer::Error> for CliError {
    fn from(e: informer::Error) -> Self {
        // kubectl's words for 401 and 403.
        CliError::Runtime(connect::describe(&e))
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Runtime(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// Parses the command line, runs the subcommand and turns the outcome into an exit status.
pub fn main() -> ExitCode {
    let outcome = args::parse(std::env::args_os().skip(1)).and_then(run);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line on stderr: newlines in server messages would break scripts that read it,
            // and other control characters in them must not reach the terminal.
            let line = e.to_string().replace('\n', " ");
            eprintln!("kwatch: error: {}", output::escape_control(&line));
            e.exit_code()
        }
    }
}

fn run(invocation: Invocation) -> CliResult {
    let Invocation { global, command } = invocation;
    match command {
        Command::Help(text) => {
            print!("{text}");
            Ok(())
        }
        Command::Version => {
            println!("kwatch {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        command => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let outcome = runtime.block_on(async move {
                match command {
                    Command::Demo(a) => demo::run(a).await,
                    Command::Sim(a) => sim::run(a).await,
                    Command::Watch(a) => watch::run(&global, a).await,
                    Command::Get(a) => get::run(&global, a).await,
                    Command::Instances(a) => instances::run(&global, a).await,
                    Command::Help(_) | Command::Version => unreachable!("handled above"),
                }
            });
            // Informer threads and watch tasks may still be running: do not wait for them.
            runtime.shutdown_background();
            outcome
        }
    }
}
