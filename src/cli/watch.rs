//! `kwatch watch`.
use super::CliResult;
use super::args::{Global, WatchArgs};
pub async fn run(_global: &Global, _args: WatchArgs) -> CliResult {
    Ok(())
}
