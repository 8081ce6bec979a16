//! `/metrics` over plain HTTP/1.1: the library's metrics (`informer::metrics::gather`, client-go's
//! names) in the Prometheus text format.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Binds `addr` and serves `/metrics` there for the life of the process; returns the bound
/// address (port 0 picks one).
pub async fn serve(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let response = if request.uri().path() == "/metrics" {
                    Response::builder()
                        .header("Content-Type", CONTENT_TYPE)
                        .body(Full::new(Bytes::from(informer::metrics::gather())))
                } else {
                    Response::builder()
                        .status(StatusCode::NOT_FOUND)
                        .body(Full::new(Bytes::from_static(b"not found: try /metrics\n")))
                };
                async move { Ok::<_, Infallible>(response.expect("a valid response")) }
            });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let _ = connection.await;
            });
        }
    });
    Ok(bound)
}
