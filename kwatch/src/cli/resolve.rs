//! Turns a RESOURCE argument into an [`ApiResource`] with the library's
//! [`Client::resolve_resource`] (the server's discovery documents, the way kubectl does), and its
//! errors into kwatch's.

use std::time::{Duration, Instant};

use informer::{ApiResource, Client, Error};

use super::connect::ErrorCollector;
use super::{CliError, CliResult};

/// Resolves a RESOURCE argument for a command that keeps trying (`kwatch watch`): a failure that
/// may pass (no answer, a proxy's 5xx, 429, a cut connection) is reported through `errors` and
/// retried after a backoff (0.8 s doubling to 5 s), until `deadline` if there is one; anything
/// else (a malformed name, an unknown resource, 401, 403, TLS) ends the command as [`resolve`]
/// says.
pub async fn resolve_retrying(
    client: &Client,
    resource: &str,
    errors: &ErrorCollector,
    deadline: Option<(Instant, Duration)>,
    what: &str,
) -> CliResult<ApiResource> {
    let mut delay = Duration::from_millis(800);
    loop {
        match client.resolve_resource(resource).await {
            Ok(r) => return Ok(r),
            Err(e) if e.is_retryable() => {
                errors.report(&e);
                if let Some((started, timeout)) = deadline {
                    if started.elapsed() + delay > timeout {
                        return Err(errors.sync_failure_after(what, timeout));
                    }
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(resolve_failure(e)),
        }
    }
}

/// Resolves a RESOURCE argument: a malformed one is a usage error, 401/403 get kubectl's words.
pub async fn resolve(client: &Client, resource: &str) -> CliResult<ApiResource> {
    client
        .resolve_resource(resource)
        .await
        .map_err(resolve_failure)
}

/// A failure to resolve, in kwatch's words.
fn resolve_failure(e: Error) -> CliError {
    match e {
        Error::InvalidName(m) => CliError::Usage(m),
        Error::UnknownResource(m) => CliError::Runtime(m),
        e if matches!(e.http_code(), Some(401 | 403)) => {
            CliError::Runtime(super::connect::describe(&e))
        }
        e => CliError::Runtime(format!("discovery: {e}")),
    }
}
