//! The URL of an HTTP proxy (kubeconfig `proxy-url`), which may hold credentials: a config holds
//! it, the client tunnels through it (`client/proxy.rs`), and neither ever prints its userinfo.

use std::fmt;
use std::str::FromStr;

use hyper::Uri;

/// The URL of an HTTP proxy (kubeconfig `proxy-url`), e.g. `http://user:password@proxy:3128`.
///
/// The userinfo (user and password) is a credential: `Debug` and `Display` print `[redacted]` in
/// its place (through [`redact_url`](super::redact_url), like every URL the crate prints), so a
/// proxy URL can go into logs and error messages.
///
/// ```
/// use informer::config::ProxyUrl;
/// let proxy: ProxyUrl = "http://alice:s3cret@proxy.example:3128".parse().unwrap();
/// assert_eq!(proxy.to_string(), "http://[redacted]@proxy.example:3128/");
/// assert!(!format!("{proxy:?}").contains("s3cret"));
/// assert_eq!(proxy.uri().authority().unwrap().as_str(), "alice:s3cret@proxy.example:3128");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl(Uri);

impl ProxyUrl {
    /// Wraps a URL.
    pub fn new(uri: Uri) -> ProxyUrl {
        ProxyUrl(uri)
    }

    /// The URL, credentials included.
    pub fn uri(&self) -> &Uri {
        &self.0
    }
}

impl From<Uri> for ProxyUrl {
    fn from(uri: Uri) -> ProxyUrl {
        ProxyUrl(uri)
    }
}

impl FromStr for ProxyUrl {
    type Err = hyper::http::uri::InvalidUri;
    /// Parses a URL; the error never repeats the input (it may hold a password).
    fn from_str(s: &str) -> std::result::Result<ProxyUrl, Self::Err> {
        s.parse().map(ProxyUrl)
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&super::redact_url(&self.0.to_string()))
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({self})")
    }
}
