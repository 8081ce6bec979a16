//! The TCP connector under TLS: direct, or through an HTTP proxy with a `CONNECT` tunnel
//! (kubeconfig `proxy-url`). TLS runs end to end through the tunnel, so the proxy sees only the
//! target host and port.
//!
//! Only `http://` proxies are supported (no TLS to the proxy, no SOCKS); credentials in the proxy
//! URL's userinfo are sent as `Proxy-Authorization: Basic`.

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

use crate::error::{Error, Result};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection to the apiserver's host and port, possibly tunnelled through a proxy.
#[derive(Clone, Debug)]
pub(crate) enum Connector {
    Direct(HttpConnector),
    Tunnel(Tunnel<HttpConnector>),
}

impl Connector {
    /// `http` directly, or through `proxy` when set. Errors name the proxy URL's problem.
    pub(crate) fn new(http: HttpConnector, proxy: Option<&Uri>) -> Result<Connector> {
        let Some(proxy) = proxy else {
            return Ok(Connector::Direct(http));
        };
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
        Ok(Connector::Tunnel(tunnel))
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
            Connector::Tunnel(t) => t.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match self {
            Connector::Direct(c) => {
                let connecting = c.call(dst);
                Box::pin(async move { connecting.await.map_err(Into::into) })
            }
            Connector::Tunnel(t) => {
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
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
        let socks: Uri = "socks5://127.0.0.1:1080".parse().unwrap();
        assert!(Connector::new(http.clone(), Some(&socks)).is_err());
        let proxy: Uri = "http://u%40x:p@127.0.0.1:3128".parse().unwrap();
        assert!(matches!(
            Connector::new(http, Some(&proxy)),
            Ok(Connector::Tunnel(_))
        ));
    }
}
