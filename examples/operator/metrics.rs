//! `/metrics` over plain HTTP/1.1: the library's metrics (`informer::metrics::gather`, client-go's
//! names) in the Prometheus text format.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use informer::leaderelection::FencingToken;
use tokio::net::TcpListener;
use tokio::sync::watch;

const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Binds `addr` and serves `/metrics` there for the life of the process; returns the bound
/// address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    fence: watch::Receiver<Option<FencingToken>>,
    lease: String,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (fence, lease) = (fence.clone(), lease.clone());
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let leading = fence.borrow().is_some();
                let response = if request.uri().path() == "/metrics" {
                    Response::builder()
                        .header("Content-Type", CONTENT_TYPE)
                        .body(Full::new(Bytes::from(text(leading, &lease))))
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

/// The library's metrics, with `leader_election_master_status` for this replica's Lease added
/// when the library does not record it (yet).
fn text(leading: bool, lease: &str) -> String {
    let mut text = informer::metrics::gather();
    if !text.contains("leader_election_master_status") {
        text.push_str(
            "# HELP leader_election_master_status Gauge of if the reporting system is master of \
             the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string \
             used to identify the lease. Please make sure to group by name.\n\
             # TYPE leader_election_master_status gauge\n",
        );
        text.push_str(&format!(
            "leader_election_master_status{{name=\"{lease}\"}} {}\n",
            u8::from(leading)
        ));
    }
    text
}
