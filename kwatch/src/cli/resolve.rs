//! Turns a RESOURCE argument into an [`ApiResource`] with the library's
//! [`Client::resolve_resource`] (the server's discovery documents, the way kubectl does), and its
//! errors into kwatch's.

use informer::{ApiResource, Client, Error};

use super::{CliError, CliResult};

/// Resolves a RESOURCE argument: a malformed one is a usage error, 401/403 get kubectl's words.
pub async fn resolve(client: &Client, resource: &str) -> CliResult<ApiResource> {
    client
        .resolve_resource(resource)
        .await
        .map_err(|e| match e {
            Error::InvalidName(m) => CliError::Usage(m),
            Error::UnknownResource(m) => CliError::Runtime(m),
            e if matches!(e.http_code(), Some(401 | 403)) => {
                CliError::Runtime(super::connect::describe(&e))
            }
            e => CliError::Runtime(format!("discovery: {e}")),
        })
}
