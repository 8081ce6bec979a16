//! The TCP connector under TLS: direct, or through an HTTP proxy with a `CONNECT` tunnel
//! (kubeconfig `proxy-url`). TLS runs end to end through the tunnel, so the proxy sees only the
//! target host and port.
//!
//! Only `http://` proxies are supported (no TLS to the proxy, no SOCKS); credentials in the proxy
//! URL's userinfo are sent as `Proxy-Authorization: Basic`, and never printed
//! ([`ProxyUrl`](crate::config::ProxyUrl)).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use hyper::Uri;
use hyper::header::HeaderValue;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use crate::config::ProxyUrl;
use crate::error::{Error, Result};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection to the apiserver's host and port, possibly tunnelled through a proxy.
#[derive(Clone)]
pub(crate) enum Connector {
    Direct(HttpConnector),
    /// The proxy's URL kept for `Debug` (redacted), and the tunnel.
    Tunnel(ProxyUrl, Box<Tunnel<HttpConnector>>),
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Connector::Direct(_) => f.write_str("Direct"),
            Connector::Tunnel(proxy, _) => write!(f, "Tunnel({proxy})"),
        }
    }
}

impl Connector {
    /// `http` directly, or through `proxy` when set. Errors name the proxy URL's problem, never
    /// its credentials.
    pub(crate) fn new(http: HttpConnector, proxy: Option<&ProxyUrl>) -> Result<Connector> {
        let Some(proxy_url) = proxy else {
            return Ok(Connector::Direct(http));
        };
        let proxy = proxy_url.uri();
        if proxy.scheme_str() != Some("http") {
            return Err(Error::Config(format!(
                "proxy-url: only http:// proxies (HTTP CONNECT) are supported, not {:?}",
                proxy.scheme_str().unwrap_or("")
            )));
        }
        let authority = proxy
            .authority()
            .ok_or_else(|| Error::Config("proxy-url: no host".into()))?;
        let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority.as_str()),
        };
        let target: Uri = format!("http://{host_port}")
            .parse()
            .map_err(|e| Error::Config(format!("proxy-url: bad host {host_port:?}: {e}")))?;
        let mut tunnel = Tunnel::new(target, http);
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            let credentials = format!("{}:{}", percent_decode(user), percent_decode(password));
            let value = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            );
            let value = HeaderValue::from_str(&value)
                .map_err(|_| Error::Config("proxy-url: unusable credentials".into()))?;
            tunnel = tunnel.with_auth(value);
        }
        Ok(Connector::Tunnel(proxy_url.clone(), Box::new(tunnel)))
    }
}

impl Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        match self {
            Connector::Direct(c) => c.poll_ready(cx).map_err(Into::into),
            Connector::Tunnel(_, t) => t.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match self {
            Connector::Direct(c) => {
                let connecting = c.call(dst);
                Box::pin(async move { connecting.await.map_err(Into::into) })
            }
            Connector::Tunnel(_, t) => {
                let connecting = t.call(dst);
                Box::pin(async move {
                    connecting
                        .await
                        .map_err(|e| format!("through proxy: {e}").into())
                })
            }
        }
    }
}

/// `%XX` escapes decoded (invalid ones kept as written).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%40b%3Ac"), "a@b:c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn only_http_proxies() {
        let http = HttpConnector::new();
        let socks: ProxyUrl = "socks5://127.0.0.1:1080".parse().unwrap();
        assert!(Connector::new(http.clone(), Some(&socks)).is_err());
        let proxy: ProxyUrl = "http://u%40x:p@127.0.0.1:3128".parse().unwrap();
        assert!(matches!(
            Connector::new(http, Some(&proxy)),
            Ok(Connector::Tunnel(..))
        ));
    }

    #[test]
    fn proxy_credentials_are_never_printed() {
        let secret = "hunter2-s3cret";
        let proxy: ProxyUrl = format!("http://alice:{secret}@127.0.0.1:3128")
            .parse()
            .unwrap();
        let connector = Connector::new(HttpConnector::new(), Some(&proxy)).unwrap();
        let socks: ProxyUrl = format!("socks5://alice:{secret}@127.0.0.1:1080")
            .parse()
            .unwrap();
        let refused = Connector::new(HttpConnector::new(), Some(&socks)).unwrap_err();
        let bad: std::result::Result<ProxyUrl, _> =
            format!("http://alice:{secret}@[bad host").parse();
        for text in [
            format!("{proxy}"),
            format!("{proxy:?}"),
            format!("{connector:?}"),
            format!("{refused}"),
            format!("{refused:?}"),
            format!("{}", bad.as_ref().unwrap_err()),
            format!("{bad:?}"),
        ] {
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains("alice"), "{text}");
        }
        assert_eq!(proxy.to_string(), "http://[redacted]@127.0.0.1:3128/");

        // Whatever holds it prints it redacted: the configuration and the client built from it.
        let mut config = crate::Config::new("http://127.0.0.1:1".parse().unwrap());
        config.proxy_url = Some(proxy.clone());
        let client = crate::Client::new(config.clone()).unwrap();
        for text in [format!("{config:?}"), format!("{client:?}")] {
            assert!(!text.contains(secret), "{text}");
            assert!(text.contains("[redacted]@127.0.0.1:3128"), "{text}");
        }
    }
}
