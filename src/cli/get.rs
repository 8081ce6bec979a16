//! `kwatch get`.
use super::CliResult;
use super::args::{GetArgs, Global};
pub async fn run(_global: &Global, _args: GetArgs) -> CliResult {
    Ok(())
}
