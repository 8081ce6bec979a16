//! The command line: global options, subcommands and their options, parsed with `lexopt`.
//!
//! Options may come before or after the subcommand (`kwatch -n prod watch pods` and
//! `kwatch watch pods -n prod` are the same). Every option is lexed in one pass; afterwards each
//! subcommand accepts only its own options, so `kwatch get pods --until-synced` is a usage error.

use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use lexopt::prelude::*;

use super::{CliError, CliResult};

pub const HELP: &str = "\
kwatch: watch Kubernetes objects through an informer (list once, watch, read from memory)

Usage: kwatch [GLOBAL OPTIONS] SUBCOMMAND [OPTIONS]   (options before or after the subcommand)

Subcommands:
  demo        the simulator with churn and faults, informers and discovery on it, a live view
  sim         the embedded apiserver simulator in the foreground
  watch       run an informer and print each notification (SYNCED once the list is in)
  get         list objects from a synced informer
  instances   a Service's endpoints, as the library's discovery sees them

`kwatch SUBCOMMAND --help` (or `kwatch help SUBCOMMAND`) shows a subcommand's options.

Global options:
  --server URL                  the apiserver (overrides any kubeconfig)
  --kubeconfig PATH             the kubeconfig file (default $KUBECONFIG, then ~/.kube/config)
  --context NAME                the kubeconfig context
  --token TOKEN                 bearer token (for `sim`: the token the simulator requires)
  --certificate-authority PATH  CA bundle for the server's certificate
  --insecure-skip-tls-verify    do not verify the server's certificate
  -n, --namespace NS            the namespace (default: the context's)
  -A, --all-namespaces          every namespace
  -h, --help                    this help
  -V, --version                 the version

Without --server: the kubeconfig, then the in-cluster service account. No cluster at hand?
Try `kwatch demo`, or `kwatch sim` and point kwatch (or kubectl) at the URL it prints.

Exit status: 0 success, 1 runtime error, 2 usage error.
";

const GLOBAL_NOTE: &str = "\
Global options (--server, --kubeconfig, --context, --token, --certificate-authority,
--insecure-skip-tls-verify, -n, -A) go before or after the subcommand: see `kwatch --help`.
Exit status: 0 success, 1 runtime error, 2 usage error.
";

const DEMO_HELP: &str = "\
kwatch demo: what the library does, in seconds, with no cluster

Usage: kwatch demo [--services N] [--pods N] [--duration S] [--rate R]

Starts the embedded simulator with a churning workload (rolling updates, scaling, readiness
flips), mirrors its Services, EndpointSlices and Pods with informers, runs the library's discovery
on them and injects a fault every 2 s. Shows a live view about once a second on a terminal (plain
lines otherwise), and at the end (Ctrl-C or --duration) a summary whose last line is
`divergences: N` (stores compared with the simulator; exit status 1 unless N is 0).

Options:
  --services N    services in the workload (default 8)
  --pods N        pods per service (default 10)
  --duration S    stop after S: 10, 10s, 500ms, 2m (default: Ctrl-C on a terminal, else 10 s)
  --rate R        churn steps per second (default 100)
  -h, --help      this help

Needs no cluster: the global options are not used.
";

const SIM_HELP: &str = "\
kwatch sim: the embedded apiserver simulator in the foreground, until Ctrl-C

Usage: kwatch sim [--listen ADDR] [--tls] [--token T] [--churn]

The first stdout line is `listening on URL`; the next names a kubeconfig written for it (and with
--tls, a third names the CA file), so kubectl or any client can be pointed at it.

Options:
  --listen ADDR   address to listen on (default 127.0.0.1:0, a free port)
  --tls           serve HTTPS with a generated CA
  --token T       require this bearer token
  --churn         run the demo's workload on it (3 services x 5 pods, 20 steps/s)
  -h, --help      this help
";

const WATCH_HELP: &str = "\
kwatch watch: run an informer and print each handler notification

Usage: kwatch watch RESOURCE [-l SELECTOR] [--field-selector S] [-o table|jsonl|none]
                   [--until-synced] [--max-events N] [--sync-timeout S] [--stats]

RESOURCE is a plural (pods), a short name (po), a kind (Pod), plural.group
(endpointslices.discovery.k8s.io) or group/version/resource (example.com/v1/widgets).

-o jsonl prints one JSON object per notification,
  {\"type\":\"ADDED\"|\"MODIFIED\"|\"DELETED\",\"key\":\"ns/name\",\"resourceVersion\":\"...\",\"object\":{...}}
and once the initial list is applied {\"type\":\"SYNCED\",\"objects\":N,\"resourceVersion\":\"...\"}.

Options:
  -l, --selector SELECTOR    label selector, sent to the server
  --field-selector S         field selector, sent to the server
  -o, --output FORMAT        table (default), jsonl, or none (print nothing and register no
                             handler: the cache alone, for measuring)
  --until-synced             exit after the SYNCED line
  --max-events N             exit after N watch events (after the initial list) have been applied
                             to the store (and printed)
  --sync-timeout S           exit (status 1) if the initial list is not synced after S: 30, 30s,
                             2m (default: keep trying; failures are printed on stderr)
  --stats                    at exit, one JSON line on stderr: sync_seconds, watch_events,
                             watch_seconds, events_per_sec, notifications (printed; with -o
                             none, changes applied to the store), objects, peak_rss_kib
  -h, --help                 this help
";

const GET_HELP: &str = "\
kwatch get: list objects from a synced informer (never a plain LIST)

Usage: kwatch get RESOURCE [NAME] [-l SELECTOR] [--field-selector S] [-o table|json|jsonl]

RESOURCE as for `kwatch watch`. With NAME only that object is watched; a missing one is an error
(exit status 1).

Options:
  -l, --selector SELECTOR    label selector, sent to the server
  --field-selector S         field selector, sent to the server
  -o, --output FORMAT        table (default, like kubectl), json (a List, or the object with
                             NAME), or jsonl (one object per line)
  -h, --help                 this help
";

const INSTANCES_HELP: &str = "\
kwatch instances: a Service's endpoints, as the library's discovery (informer::discovery) sees them

Usage: kwatch instances SERVICE [--port NAME] [-w] [-o table|jsonl]

SERVICE is NAME (in -n's namespace, else the context's) or NAMESPACE/NAME. Every unique endpoint
is listed once with its conditions, not-ready ones included; the state is discovery's: NotSynced,
ServiceAbsent, NoEndpoints (nothing usable) or Ready (something usable).

Which port: --port NAME shows that Service port (--port \"\" the unnamed one). Without --port, a
Service with one port shows that port, named or not; a Service with several ports shows all of
them, each endpoint once per target port number; the revision is then the newest of the ports'.

-o jsonl prints one line per snapshot:
  {\"service\":\"ns/name\",\"revision\":N,\"state\":\"Ready\",\"instances\":[{\"address\":\"10.0.0.1\",
   \"port\":8080,\"ready\":true,\"serving\":true,\"terminating\":false,\"zone\":...,\"node\":...,
   \"pod\":\"ns/name\"}]}

Options:
  --port NAME             the Service port name
  -w, --watch             keep running: print each new snapshot (discovery's subscription)
  -o, --output FORMAT     table (default) or jsonl
  -h, --help              this help
";

/// The subcommands, with their help.
const SUBCOMMANDS: &[(&str, &str)] = &[
    ("demo", DEMO_HELP),
    ("sim", SIM_HELP),
    ("watch", WATCH_HELP),
    ("get", GET_HELP),
    ("instances", INSTANCES_HELP),
];

/// The help of a subcommand (ending with the note on global options), or `None` for an unknown
/// name.
pub fn subcommand_help(name: &str) -> Option<String> {
    let (_, help) = SUBCOMMANDS.iter().find(|(n, _)| *n == name)?;
    Some(format!("{help}\n{GLOBAL_NOTE}"))
}

fn unknown_subcommand(name: &str) -> CliError {
    CliError::Usage(format!(
        "unknown subcommand {name:?}: use demo, sim, watch, get or instances"
    ))
}

/// Options that apply to every subcommand that talks to a cluster.
#[derive(Clone, Debug, Default)]
pub struct Global {
    pub server: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub token: Option<String>,
    pub certificate_authority: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
    pub namespace: Option<String>,
    pub all_namespaces: bool,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Jsonl,
    None,
}

impl Format {
    fn parse(s: &str, allowed: &[Format]) -> CliResult<Format> {
        let f = match s {
            "table" | "wide" => Format::Table,
            "json" => Format::Json,
            "jsonl" | "ndjson" => Format::Jsonl,
            "none" => Format::None,
            other => return Err(CliError::Usage(format!("unknown output format {other:?}"))),
        };
        if allowed.contains(&f) {
            Ok(f)
        } else {
            Err(CliError::Usage(format!(
                "output format {s:?} is not available here"
            )))
        }
    }
}

#[derive(Clone, Debug)]
pub struct DemoArgs {
    pub services: usize,
    pub pods: usize,
    /// `None`: until Ctrl-C (the default on a terminal).
    pub duration: Option<Duration>,
    /// Churn steps per second.
    pub rate: f64,
}

#[derive(Clone, Debug)]
pub struct SimArgs {
    pub listen: SocketAddr,
    pub tls: bool,
    pub token: Option<String>,
    pub churn: bool,
}

#[derive(Clone, Debug)]
pub struct WatchArgs {
    pub resource: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub output: Format,
    pub until_synced: bool,
    pub max_events: Option<u64>,
    pub stats: bool,
    /// Give up (exit 1) when the first sync has not happened this long after the start; `None`:
    /// keep trying for ever, reporting failures on stderr.
    pub sync_timeout: Option<Duration>,
}

#[derive(Clone, Debug)]
pub struct GetArgs {
    pub resource: String,
    pub name: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub output: Format,
}

#[derive(Clone, Debug)]
pub struct InstancesArgs {
    pub service: String,
    pub port: Option<String>,
    pub watch: bool,
    pub output: Format,
}

#[derive(Clone, Debug)]
pub enum Command {
    Demo(DemoArgs),
    Sim(SimArgs),
    Watch(WatchArgs),
    Get(GetArgs),
    Instances(InstancesArgs),
    /// Print this text (the general help or a subcommand's).
    Help(String),
    Version,
}

#[derive(Clone, Debug)]
pub struct Invocation {
    pub global: Global,
    pub command: Command,
}

/// Everything lexed, before it is checked against the subcommand.
#[derive(Default)]
struct Lexed {
    global: Global,
    positionals: Vec<String>,
    /// Subcommand options seen, as written (for error messages), with their value if any.
    specific: Vec<(String, Option<String>)>,
    help: bool,
    version: bool,
}

impl Lexed {
    fn take(&mut self, names: &[&str]) -> Option<Option<String>> {
        let i = self
            .specific
            .iter()
            .position(|(n, _)| names.contains(&n.as_str()))?;
        Some(self.specific.remove(i).1)
    }
    fn flag(&mut self, names: &[&str]) -> bool {
        self.take(names).is_some()
    }
    fn value(&mut self, names: &[&str]) -> Option<String> {
        self.take(names).flatten()
    }
    fn number<T: FromStr>(&mut self, names: &[&str]) -> CliResult<Option<T>> {
        let Some(v) = self.value(names) else {
            return Ok(None);
        };
        v.parse()
            .map(Some)
            .map_err(|_| CliError::Usage(format!("{}: {v:?} is not a valid number", names[0])))
    }
    /// A number within `min..=max` (NaN and infinities are outside every range).
    fn number_in<T>(&mut self, names: &[&str], min: T, max: T) -> CliResult<Option<T>>
    where
        T: FromStr + PartialOrd + fmt::Display + Copy,
    {
        let Some(n) = self.number::<T>(names)? else {
            return Ok(None);
        };
        // `contains` is false for NaN: it compares false with everything.
        if !(min..=max).contains(&n) {
            return Err(CliError::Usage(format!(
                "{}: {n} is out of range ({min} to {max})",
                names[0]
            )));
        }
        Ok(Some(n))
    }
}

/// The largest demo workload: the simulator holds it in memory, and the live view is meant to be
/// read (a few hundred services at most).
const MAX_DEMO_SERVICES: usize = 10_000;
const MAX_DEMO_PODS_PER_SERVICE: usize = 1_000;
/// Churn steps per second: above this the churn interval would be shorter than a microsecond.
const MAX_DEMO_RATE: f64 = 1_000_000.0;
/// The longest `--duration`: longer runs are a Ctrl-C away, and a bound keeps deadline arithmetic
/// (`Instant + Duration`) far from overflow.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Subcommand options that take a value.
const VALUED: &[&str] = &[
    "--services",
    "--pods",
    "--duration",
    "--rate",
    "--listen",
    "-l",
    "--selector",
    "--field-selector",
    "-o",
    "--output",
    "--max-events",
    "--sync-timeout",
    "--port",
];
/// Subcommand options that are flags.
const FLAGS: &[&str] = &[
    "--tls",
    "--churn",
    "--until-synced",
    "--stats",
    "-w",
    "--watch",
];

/// Parses the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> CliResult<Invocation> {
    let args: Vec<OsString> = args.into_iter().collect();
    let lexed = lex(args.clone()).map_err(|e| {
        // An unknown option: point at the help of the subcommand it was given to, if any.
        let sub = args
            .iter()
            .find_map(|a| SUBCOMMANDS.iter().find(|(n, _)| a.to_str() == Some(n)));
        match sub {
            Some((name, _)) => CliError::SubcommandUsage(name, e.to_string()),
            None => CliError::Usage(e.to_string()),
        }
    })?;
    build(lexed)
}

fn lex(args: impl IntoIterator<Item = OsString>) -> Result<Lexed, lexopt::Error> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut l = Lexed::default();
    while let Some(arg) = parser.next()? {
        let name = match &arg {
            Short(c) => format!("-{c}"),
            Long(s) => format!("--{s}"),
            Value(v) => {
                l.positionals.push(v.clone().string()?);
                continue;
            }
        };
        let g = &mut l.global;
        match arg {
            Long("server") => g.server = Some(parser.value()?.string()?),
            Long("kubeconfig") => g.kubeconfig = Some(parser.value()?.into()),
            Long("context") => g.context = Some(parser.value()?.string()?),
            Long("token") => g.token = Some(parser.value()?.string()?),
            Long("certificate-authority") => g.certificate_authority = Some(parser.value()?.into()),
            Long("insecure-skip-tls-verify") => g.insecure_skip_tls_verify = true,
            Short('n') | Long("namespace") => g.namespace = Some(parser.value()?.string()?),
            Short('A') | Long("all-namespaces") => g.all_namespaces = true,
            Short('h') | Long("help") => l.help = true,
            Short('V') | Long("version") => l.version = true,
            _ if VALUED.contains(&name.as_str()) => {
                let v = parser.value()?.string()?;
                l.specific.push((name, Some(v)));
            }
            _ if FLAGS.contains(&name.as_str()) => l.specific.push((name, None)),
            other => return Err(other.unexpected()),
        }
    }
    Ok(l)
}

fn build(mut l: Lexed) -> CliResult<Invocation> {
    // `kwatch help [SUBCOMMAND]` is `kwatch [SUBCOMMAND] --help`.
    if l.positionals.first().is_some_and(|p| p == "help") {
        l.positionals.remove(0);
        l.help = true;
    }
    if l.help {
        let text = match l.positionals.first() {
            None => HELP.to_owned(),
            Some(sub) => subcommand_help(sub).ok_or_else(|| unknown_subcommand(sub))?,
        };
        return Ok(Invocation {
            global: l.global,
            command: Command::Help(text),
        });
    }
    if l.version {
        return Ok(Invocation {
            global: l.global,
            command: Command::Version,
        });
    }
    if l.positionals.is_empty() {
        return Err(CliError::Usage(
            "no subcommand: use demo, sim, watch, get or instances".into(),
        ));
    }
    let sub = l.positionals.remove(0);
    let Some(&(sub, _)) = SUBCOMMANDS.iter().find(|(n, _)| *n == sub) else {
        return Err(unknown_subcommand(&sub));
    };
    // From here on a usage error points at the subcommand's help.
    let in_sub = |e: CliError| match e {
        CliError::Usage(m) => CliError::SubcommandUsage(sub, m),
        other => other,
    };
    build_subcommand(sub, l).map_err(in_sub)
}

fn build_subcommand(sub: &str, mut l: Lexed) -> CliResult<Invocation> {
    let output_of = |l: &mut Lexed, default: Format, allowed: &[Format]| -> CliResult<Format> {
        match l.value(&["-o", "--output"]) {
            Some(v) => Format::parse(&v, allowed),
            None => Ok(default),
        }
    };
    let command = match sub {
        "demo" => {
            let duration = match l.value(&["--duration"]) {
                Some(v) => Some(parse_duration("--duration", &v)?),
                None => None,
            };
            let services = l
                .number_in(&["--services"], 1, MAX_DEMO_SERVICES)?
                .unwrap_or(8);
            let pods = l
                .number_in(&["--pods"], 0, MAX_DEMO_PODS_PER_SERVICE)?
                .unwrap_or(10);
            // A rate of 0 would mean a churn step every 1/0 seconds: at least one a minute.
            let rate = l
                .number_in(&["--rate"], 1.0 / 60.0, MAX_DEMO_RATE)?
                .unwrap_or(100.0);
            Command::Demo(DemoArgs {
                services,
                pods,
                duration,
                rate,
            })
        }
        "sim" => {
            let listen = match l.value(&["--listen"]) {
                Some(v) => v
                    .parse()
                    .map_err(|_| CliError::Usage(format!("--listen: {v:?} is not HOST:PORT")))?,
                None => SocketAddr::from(([127, 0, 0, 1], 0)),
            };
            Command::Sim(SimArgs {
                listen,
                tls: l.flag(&["--tls"]),
                // For `sim`, --token is the token the server requires, not one to send.
                token: l.global.token.take(),
                churn: l.flag(&["--churn"]),
            })
        }
        "watch" => Command::Watch(WatchArgs {
            resource: one_positional(&mut l, "RESOURCE")?,
            label_selector: l.value(&["-l", "--selector"]),
            field_selector: l.value(&["--field-selector"]),
            output: output_of(
                &mut l,
                Format::Table,
                &[Format::Table, Format::Jsonl, Format::None],
            )?,
            until_synced: l.flag(&["--until-synced"]),
            max_events: l.number(&["--max-events"])?,
            stats: l.flag(&["--stats"]),
            sync_timeout: match l.value(&["--sync-timeout"]) {
                Some(v) => Some(parse_duration("--sync-timeout", &v)?),
                None => None,
            },
        }),
        "get" => {
            let resource = one_positional(&mut l, "RESOURCE")?;
            let name = if l.positionals.is_empty() {
                None
            } else {
                Some(l.positionals.remove(0))
            };
            Command::Get(GetArgs {
                resource,
                name,
                label_selector: l.value(&["-l", "--selector"]),
                field_selector: l.value(&["--field-selector"]),
                output: output_of(
                    &mut l,
                    Format::Table,
                    &[Format::Table, Format::Json, Format::Jsonl],
                )?,
            })
        }
        "instances" => Command::Instances(InstancesArgs {
            service: one_positional(&mut l, "SERVICE")?,
            port: l.value(&["--port"]),
            watch: l.flag(&["-w", "--watch"]),
            output: output_of(&mut l, Format::Table, &[Format::Table, Format::Jsonl])?,
        }),
        other => return Err(unknown_subcommand(other)),
    };
    if let Some(extra) = l.positionals.first() {
        return Err(CliError::Usage(format!(
            "unexpected argument {extra:?} for {sub}"
        )));
    }
    if let Some((name, _)) = l.specific.first() {
        return Err(CliError::Usage(format!(
            "option {name} does not apply to {sub}"
        )));
    }
    Ok(Invocation {
        global: l.global,
        command,
    })
}

fn one_positional(l: &mut Lexed, what: &str) -> CliResult<String> {
    if l.positionals.is_empty() {
        return Err(CliError::Usage(format!("missing {what}")));
    }
    Ok(l.positionals.remove(0))
}

/// `10`, `10s`, `1.5`, `500ms`, `2m`.
fn parse_duration(flag: &str, s: &str) -> CliResult<Duration> {
    let bad = || {
        CliError::Usage(format!(
            "{flag}: {s:?} is not a duration (e.g. 10, 10s, 2m)"
        ))
    };
    let (number, unit) = match s {
        _ if s.ends_with("ms") => (&s[..s.len() - 2], 0.001),
        _ if s.ends_with('s') => (&s[..s.len() - 1], 1.0),
        _ if s.ends_with('m') => (&s[..s.len() - 1], 60.0),
        _ => (s, 1.0),
    };
    let secs: f64 = number.trim().parse().map_err(|_| bad())?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    // `try_from`: `Duration::from_secs_f64` panics on values it cannot hold (1e20, 1e308m).
    match Duration::try_from_secs_f64(secs * unit) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(CliError::Usage(format!(
            "{flag}: {s:?} is longer than {} days",
            MAX_DURATION.as_secs() / 86_400
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> CliResult<Invocation> {
        parse(s.split_whitespace().map(OsString::from))
    }

    #[test]
    fn global_options_before_or_after_the_subcommand() {
        for line in [
            "-n prod watch pods",
            "watch pods -n prod",
            "watch -n prod pods",
        ] {
            let inv = parse_str(line).unwrap();
            assert_eq!(inv.global.namespace.as_deref(), Some("prod"), "{line}");
            assert!(matches!(inv.command, Command::Watch(ref w) if w.resource == "pods"));
        }
    }

    #[test]
    fn options_of_another_subcommand_are_usage_errors() {
        // Errors within a subcommand point at its help; the others at kwatch's.
        let in_sub = |line: &str, sub: &str| matches!(parse_str(line), Err(CliError::SubcommandUsage(s, _)) if s == sub);
        assert!(in_sub("get pods --until-synced", "get"));
        assert!(in_sub("watch", "watch"));
        assert!(matches!(parse_str("frobnicate"), Err(CliError::Usage(_))));
        assert!(in_sub("watch pods -o json", "watch"));
        assert!(in_sub("watch pods --bogus", "watch"));
        assert!(matches!(parse_str("--bogus"), Err(CliError::Usage(_))));
    }

    #[test]
    fn help_general_and_per_subcommand() {
        let help = |line: &str| match parse_str(line) {
            Ok(Invocation {
                command: Command::Help(text),
                ..
            }) => text,
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(help("--help"), HELP);
        assert_eq!(help("-n x -h"), HELP);
        assert_eq!(help("help"), HELP);
        for (sub, _) in SUBCOMMANDS {
            let text = help(&format!("{sub} --help"));
            assert!(text.starts_with(&format!("kwatch {sub}: ")), "{text}");
            assert!(text.contains(&format!("Usage: kwatch {sub}")), "{text}");
            assert_eq!(help(&format!("help {sub}")), text);
            assert_eq!(help(&format!("--help {sub}")), text);
            assert!(HELP.contains(&format!("\n  {sub} ")), "{sub} not listed");
        }
        assert!(matches!(
            parse_str("frobnicate --help"),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn watch_options() {
        let inv = parse_str("watch pods -l app=x -o jsonl --max-events 5 --stats").unwrap();
        let Command::Watch(w) = inv.command else {
            panic!()
        };
        assert_eq!(w.label_selector.as_deref(), Some("app=x"));
        assert_eq!(w.output, Format::Jsonl);
        assert_eq!(w.max_events, Some(5));
        assert!(w.stats && !w.until_synced);
    }

    #[test]
    fn out_of_range_numbers_are_usage_errors() {
        for line in [
            "demo --duration 1e20",
            "demo --duration 1e308m",
            "demo --duration -1",
            "demo --duration inf",
            "demo --duration NaN",
            "demo --duration 400d",
            "demo --duration 9999999999",
            "demo --rate inf",
            "demo --rate -inf",
            "demo --rate NaN",
            "demo --rate -5",
            "demo --rate 0",
            "demo --rate 1e300",
            "demo --services 0",
            "demo --services -1",
            "demo --services 18446744073709551616",
            "demo --services 1e9",
            "demo --pods -3",
            "demo --pods 99999999",
            "watch pods --max-events -1",
            "watch pods --max-events 1e3",
            "sim --listen 127.0.0.1:99999",
        ] {
            match parse_str(line) {
                Err(CliError::SubcommandUsage(..)) => {}
                other => panic!("{line}: {other:?}"),
            }
        }
        let inv = parse_str("demo --duration 0 --rate 0.5 --services 1 --pods 0").unwrap();
        let Command::Demo(d) = inv.command else {
            panic!()
        };
        assert_eq!(d.duration, Some(Duration::ZERO));
        assert_eq!((d.rate, d.services, d.pods), (0.5, 1, 0));
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("--duration", "5").unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            parse_duration("--duration", "2m").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration("--duration", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert!(parse_duration("--duration", "soon").is_err());
    }
}
