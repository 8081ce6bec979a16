//! `kwatch`: the command-line face of the `informer` crate. See [`cli`] for the subcommands.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
