//! The HTTP side: accept loop, connection serving (HTTP/1.1 and HTTP/2, optional TLS), auth,
//! routing, query-parameter validation, and the list/get/create/update/delete handlers.
//!
//! Network input is hostile: every parse failure becomes a 4xx `Status`, never a panic.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::Value;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

use super::body::SimBody;
use super::errors::ApiError;
use super::faults::{Chunking, Faults, Injected};
use super::protobuf::{self, Form};
use super::resources::{ResourceInfo, version_doc};
use super::selector::{FieldSelector, JsonLabelSelector, Selectors};
use super::store::{DeleteOpts, ListAt, Obj, Page, PatchKind, Store, WatchFrom, WriteCtx};
use super::strategy::Endpoint;
use super::watch::{self as watchstream, WatchParams};

/// Largest request body accepted (the apiserver's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The listen queue used when the kernel's limit cannot be read: current Linux's
/// `net.core.somaxconn` default (since 5.4).
const DEFAULT_LISTEN_BACKLOG: u32 = 4096;

/// The listen queue a Go apiserver gets: Go's `net.Listen` asks for the kernel's limit
/// (`/proc/sys/net/core/somaxconn`, capped at 65535), not the 128 (`SOMAXCONN`, tokio's
/// `TcpListener::bind`) that made 1,000 watches opening at once lose SYNs here: each lost SYN cost
/// its client a whole 1 s retransmit, so a test measured the simulator, not the client.
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|n| n.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .map_or(DEFAULT_LISTEN_BACKLOG, |n| n.min(65535))
}

/// Binds `addr` with the apiserver's listen queue ([`listen_backlog`]) and `SO_REUSEADDR` (as
/// `TcpListener::bind` does on Unix, so a restarted simulator can take its port back at once).
pub(crate) fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(listen_backlog())
}

/// Server settings fixed at start.
pub(crate) struct ServerConfig {
    pub token: Option<String>,
    pub read_only_token: Option<String>,
    pub client_cert_auth: bool,
    pub bookmark_interval: Duration,
    pub rv_wait: Duration,
    pub default_watch_timeout: Duration,
    pub address: String,
    /// Answer protobuf to clients that ask for it (`SimulatorBuilder::protobuf`).
    pub protobuf: bool,
}

/// State shared by all connections.
pub(crate) struct Shared {
    pub store: Arc<Store>,
    pub faults: Faults,
    pub cfg: ServerConfig,
    pub shutdown: watch::Receiver<bool>,
}

/// Accepts connections until shutdown.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => { tokio::time::sleep(Duration::from_millis(10)).await; continue; }
            },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_conn(TokioIo::new(stream), shared, false).await,
                Some(acc) => {
                    let Ok(Ok(s)) =
                        tokio::time::timeout(Duration::from_secs(10), acc.accept(stream)).await
                    else {
                        return;
                    };
                    let cert = s
                        .get_ref()
                        .1
                        .peer_certificates()
                        .is_some_and(|c| !c.is_empty());
                    serve_conn(TokioIo::new(s), shared, cert).await
                }
            }
        });
    }
}

async fn serve_conn<I>(io: I, shared: Arc<Shared>, client_cert: bool)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut shutdown = shared.shutdown.clone();
    let svc_shared = shared.clone();
    let svc = service_fn(move |req| {
        let shared = svc_shared.clone();
        async move { handle(shared, client_cert, req).await }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Go's net/http writes canonical header names (`Content-Type`); so do we, for byte-level
    // comparisons with the captures.
    builder
        .http1()
        .timer(TokioTimer::new())
        .title_case_headers(true);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
        }
    }
}

fn base_response(code: u16) -> hyper::http::response::Builder {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(CACHE_CONTROL, "no-cache, private")
        .header(CONTENT_TYPE, "application/json")
}

/// A JSON response, cut into chunks if that fault is on.
fn json_response(faults: &Faults, code: u16, body: Vec<u8>) -> Response<SimBody> {
    let mut plan = faults.plan();
    let body = if matches!(plan.chunking, Chunking::Off) {
        SimBody::full(body)
    } else {
        SimBody::Chunks(plan.split(Bytes::from(body)).into())
    };
    base_response(code)
        .body(body)
        .unwrap_or_else(|_| Response::new(SimBody::empty()))
}

/// A protobuf body (`protobuf.rs`), cut into chunks if that fault is on.
fn protobuf_response(faults: &Faults, body: Vec<u8>) -> Response<SimBody> {
    let mut r = json_response(faults, 200, body);
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(protobuf::CONTENT_TYPE),
    );
    r
}

fn error_response(faults: &Faults, e: &ApiError) -> Response<SimBody> {
    let mut r = json_response(faults, e.code, e.to_body());
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

fn value_response(faults: &Faults, code: u16, v: &Value) -> Response<SimBody> {
    json_response(faults, code, serde_json::to_vec(v).unwrap_or_default())
}

/// The request's answer, or `Err` to close the connection without one (hyper closes it when
/// the service fails).
async fn handle(
    shared: Arc<Shared>,
    client_cert: bool,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, ConnectionReset> {
    let faults = shared.faults.clone();
    match route(&shared, client_cert, req).await {
        Ok(r) => Ok(r),
        Err(e) if e.is_connection_reset() => Err(ConnectionReset),
        Err(e) => Ok(error_response(&faults, &e)),
    }
}

/// The injected fault [`Faults::reset_next`]: the connection closed instead of an answer.
#[derive(Debug)]
struct ConnectionReset;

impl std::fmt::Display for ConnectionReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("injected fault: connection closed without an answer")
    }
}

impl std::error::Error for ConnectionReset {}

fn authenticate(
    shared: &Shared,
    client_cert: bool,
    req: &Request<Incoming>,
) -> Result<Access, ApiError> {
    let cfg = &shared.cfg;
    if cfg.token.is_none() && cfg.read_only_token.is_none() && !cfg.client_cert_auth {
        return Ok(Access::Full);
    }
    if cfg.client_cert_auth && client_cert {
        return Ok(Access::Full);
    }
    let bearer = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim);
    match bearer {
        Some(b) if cfg.token.as_deref() == Some(b) => Ok(Access::Full),
        Some(b) if cfg.read_only_token.as_deref() == Some(b) => Ok(Access::ReadOnly),
        _ => Err(ApiError::unauthorized()),
    }
}

/// What an authenticated request may do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Full,
    /// get/list/watch only; writes get 403 (user `reader`).
    ReadOnly,
}

async fn route(
    shared: &Shared,
    client_cert: bool,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, ApiError> {
    let access = authenticate(shared, client_cert, &req)?;
    let faults = &shared.faults;
    match faults.take_failure() {
        Some(Injected::Status(code)) => return Err(ApiError::injected(code)),
        Some(Injected::Html(code)) => {
            let page = format!("<html><body><h1>{code}</h1>injected fault</body></html>");
            let mut r = base_response(code)
                .body(SimBody::full(page.into_bytes()))
                .unwrap_or_else(|_| Response::new(SimBody::empty()));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            return Ok(r);
        }
        Some(Injected::EmptyObject) => return Ok(json_response(faults, 200, b"{}".to_vec())),
        Some(Injected::Reset) => return Err(ApiError::connection_reset()),
        Some(Injected::StalledBody(code)) => {
            let status = format!(
                r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"injected fault: a body that stalls","reason":"InternalError","code":{code}}}"#
            );
            let body = SimBody::Stalled {
                first: Some(Bytes::copy_from_slice(&status.as_bytes()[..40])),
                announced: status.len() as u64,
                until: Box::pin(tokio::time::sleep(std::time::Duration::from_secs(120))),
            };
            return Ok(base_response(code)
                .body(body)
                .unwrap_or_else(|_| Response::new(SimBody::empty())));
        }
        Some(Injected::PlainRetryAfter(secs)) => {
            let mut r = base_response(503)
                .body(SimBody::full(
                    &b"upstream connect error or disconnect/reset before headers. reset reason: connection failure"[..],
                ))
                .unwrap_or_else(|_| Response::new(SimBody::empty()));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
            return Ok(r);
        }
        None => {}
    }
    let path = req.uri().path().to_string();
    // As `application/x-www-form-urlencoded` parsing does: empty pairs skipped, a pair without
    // `=` has an empty value, a repeated key keeps its last value.
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k), form_decode(v))
        })
        .collect();
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let get = req.method() == Method::GET;
    let store = &shared.store;
    match segs.as_slice() {
        ["version"] if get => Ok(value_response(faults, 200, &version_doc())),
        ["api"] if get => Ok(value_response(
            faults,
            200,
            &store.with_registry(|r| r.api_versions(&shared.cfg.address)),
        )),
        ["apis"] if get => Ok(value_response(
            faults,
            200,
            &store.with_registry(|r| r.api_group_list()),
        )),
        ["openapi", "v3"] if get => Ok(value_response(
            faults,
            200,
            &store.with_registry(|r| r.openapi_v3_root()),
        )),
        ["openapi", "v3", "api", v] if get => openapi(shared, "", v),
        ["openapi", "v3", "apis", g, v] if get => openapi(shared, g, v),
        ["api", v] if get => discovery(shared, "", v),
        ["apis", g, v] if get => discovery(shared, g, v),
        ["healthz" | "readyz" | "livez"] => Ok(base_response(200)
            .header(CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(SimBody::full("ok"))
            .unwrap_or_else(|_| Response::new(SimBody::empty()))),
        ["api", "v1", rest @ ..] => resource(shared, access, "", "v1", rest, query, req).await,
        ["apis", g, v, rest @ ..] => {
            let (g, v) = (g.to_string(), v.to_string());
            resource(shared, access, &g, &v, rest, query, req).await
        }
        _ => Err(ApiError::path_not_found()),
    }
}

fn discovery(shared: &Shared, group: &str, version: &str) -> Result<Response<SimBody>, ApiError> {
    match shared
        .store
        .with_registry(|r| r.api_resource_list(group, version))
    {
        Some(doc) => Ok(value_response(&shared.faults, 200, &doc)),
        None => Err(ApiError::path_not_found()),
    }
}

fn openapi(shared: &Shared, group: &str, version: &str) -> Result<Response<SimBody>, ApiError> {
    match shared
        .store
        .with_registry(|r| r.openapi_v3_gv(group, version))
    {
        Some(doc) => Ok(value_response(&shared.faults, 200, &doc)),
        None => Err(ApiError::path_not_found()),
    }
}

/// Which object(s) a request addresses.
struct Target {
    idx: usize,
    info: Arc<ResourceInfo>,
    ns: Option<String>,
    name: Option<String>,
    /// `status` or `scale` (any other subresource is a 404).
    sub: Option<String>,
}

fn resolve_target(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<(Target, bool), ApiError> {
    let (rest, legacy_watch) = match rest {
        ["watch", r @ ..] => (r, true),
        r => (r, false),
    };
    let (ns, plural, name, sub) = match rest {
        [plural] => (None, *plural, None, None),
        // `namespaces/{name}/status` is the Namespace's subresource, not a list.
        ["namespaces", name, "status"] if group.is_empty() => {
            (None, "namespaces", Some(*name), Some("status"))
        }
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::path_not_found()),
    };
    let idx = shared
        .store
        .with_registry(|r| r.find_path(group, version, plural))
        .ok_or_else(ApiError::path_not_found)?;
    let info = shared.store.info(idx);
    if ns.is_some() && !info.api.namespaced {
        return Err(ApiError::path_not_found());
    }
    if name.is_some() && ns.is_none() && info.api.namespaced {
        return Err(ApiError::path_not_found());
    }
    let target = Target {
        idx,
        info,
        ns: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    };
    match target.sub.as_deref() {
        None => {}
        Some("status") if target.info.status_subresource && !legacy_watch => {}
        Some("scale") if target.info.scale.is_some() && !legacy_watch => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    Ok((target, legacy_watch))
}

async fn read_json(req: Request<Incoming>) -> Result<Option<Value>, ApiError> {
    let body = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                "Request entity too large: limit is 3145728",
            )
        })?
        .to_bytes();
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request was in an unknown format: {e}"
        ))
    })
}

async fn resource(
    shared: &Shared,
    access: Access,
    group: &str,
    version: &str,
    rest: &[&str],
    query: HashMap<String, String>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, ApiError> {
    let (t, legacy_watch) = resolve_target(shared, group, version, rest)?;
    if access == Access::ReadOnly && req.method() != Method::GET {
        let verb = match *req.method() {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "access",
        };
        let api = &t.info.api;
        return Err(ApiError::forbidden(
            "reader",
            verb,
            &api.plural,
            &api.group,
            t.ns.as_deref(),
        ));
    }
    if req.method() == Method::GET && shared.faults.reads_of_forbidden(&t.info.api.plural) {
        let verb = if query.get("watch").is_some_and(|w| w == "true" || w == "1") || legacy_watch {
            "watch"
        } else if t.name.is_some() {
            "get"
        } else {
            "list"
        };
        let api = &t.info.api;
        return Err(ApiError::forbidden(
            "reader",
            verb,
            &api.plural,
            &api.group,
            t.ns.as_deref(),
        ));
    }
    let faults = &shared.faults;
    let store = &shared.store;
    let ns = t.ns.as_deref();
    let method = req.method().clone();
    let header = |name: hyper::header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let content_type = header(CONTENT_TYPE);
    let content_type = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let user_agent = header(hyper::header::USER_AGENT);
    // Reads answer in the form the client's Accept asks for first: protobuf for the kinds
    // translated (unless turned off), whole objects or only their metadata.
    let accept = header(hyper::header::ACCEPT);
    let form = |list: bool| {
        protobuf::negotiate(
            &accept,
            shared.cfg.protobuf,
            protobuf::serves(&t.info),
            list,
        )
    };
    if method != Method::GET {
        check_write_options(&method, &content_type, &query)?;
    }
    let endpoint = match t.sub.as_deref() {
        Some("status") => Endpoint::Status,
        _ => Endpoint::Main,
    };
    let ctx = WriteCtx {
        endpoint,
        dry_run: query.contains_key("dryRun"),
        // The apiserver's default manager: the User-Agent up to its first `/`.
        manager: Some(match query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.clone(),
            None => user_agent.split('/').next().unwrap_or("").to_string(),
        }),
        apply: false,
    };
    if t.sub.as_deref() == Some("scale") {
        return scale(shared, &t, &method, &content_type, ctx, req).await;
    }
    match (&method, t.name.as_deref()) {
        (&Method::GET, None) => {
            let opts = ListOptions::parse(&query, legacy_watch)?;
            if opts.watch {
                Ok(watch(shared, &t, opts, form(false)).await?)
            } else {
                list(shared, &t, opts, form(true)).await
            }
        }
        (&Method::POST, None) => {
            let body = read_json(req)
                .await?
                .ok_or_else(|| ApiError::bad_request("the body of the request was empty"))?;
            let obj = store.create_with(t.idx, ns, body, &ctx)?;
            Ok(json_response(faults, 201, obj.full(&t.info)))
        }
        (&Method::GET, Some(name)) => {
            let opts = ListOptions::parse(&query, legacy_watch)?;
            if opts.watch && t.sub.is_none() {
                // A watch on one object: a field selector on its name.
                let mut opts = opts;
                opts.sel.field = FieldSelector::parse(&format!("metadata.name={name}"))
                    .map_err(ApiError::bad_request)?;
                return watch(shared, &t, opts, form(false)).await;
            }
            let obj = store.get(t.idx, ns, name)?;
            let form = if t.sub.is_none() {
                form(false)
            } else {
                Form::default()
            };
            match form {
                Form {
                    protobuf: false,
                    metadata: false,
                } => Ok(json_response(faults, 200, obj.full(&t.info))),
                Form {
                    protobuf: false,
                    metadata: true,
                } => Ok(json_response(
                    faults,
                    200,
                    protobuf::partial_json(&obj.full(&t.info)),
                )),
                Form {
                    protobuf: true,
                    metadata: false,
                } => Ok(protobuf_response(
                    faults,
                    protobuf::object_body(&obj.to_value(&t.info)),
                )),
                Form {
                    protobuf: true,
                    metadata: true,
                } => Ok(protobuf_response(
                    faults,
                    protobuf::partial_body(&obj.full(&t.info)),
                )),
            }
        }
        (&Method::PUT, Some(name)) => {
            let body = read_json(req)
                .await?
                .ok_or_else(|| ApiError::bad_request("the body of the request was empty"))?;
            let (obj, created) = store.put_with(t.idx, ns, name, body, &ctx)?;
            let code = if created { 201 } else { 200 };
            Ok(json_response(faults, code, obj.full(&t.info)))
        }
        (&Method::PATCH, Some(name)) => {
            let kind = patch_kind(&t.info, &content_type)?;
            let Some(kind) = kind else {
                // Server-side apply.
                let body = read_apply_body(req).await?;
                let force = parse_bool(&query, "force")?.unwrap_or(false);
                let (obj, created) = store.apply(t.idx, ns, name, &body, &ctx, force)?;
                let code = if created { 201 } else { 200 };
                return Ok(json_response(faults, code, obj.full(&t.info)));
            };
            let body = read_json(req)
                .await?
                .ok_or_else(|| ApiError::bad_request("the body of the request was empty"))?;
            let obj = store.patch_with(t.idx, ns, name, kind, &body, &ctx)?;
            Ok(json_response(faults, 200, obj.full(&t.info)))
        }
        (&Method::DELETE, name) if t.sub.is_none() => {
            let body = read_json(req).await?;
            let opts = delete_options(body.as_ref(), &query)?;
            match name {
                Some(name) => {
                    let (obj, gone) = store.delete_with(t.idx, ns, name, &opts)?;
                    let body = if gone {
                        delete_result(&t.info, &obj)
                    } else {
                        obj.full(&t.info)
                    };
                    Ok(json_response(faults, 200, body))
                }
                // The apiserver serves no deletecollection across all namespaces of a
                // namespaced resource (its answer, checked against 1.20: 405).
                None if t.info.api.namespaced && ns.is_none() => {
                    Err(ApiError::method_not_allowed())
                }
                None => {
                    // deletecollection: the listed objects, each deleted as a DELETE would.
                    let mut list_query = query.clone();
                    list_query.retain(|k, _| k == "labelSelector" || k == "fieldSelector");
                    let lo = ListOptions::parse(&list_query, false)?;
                    let page = store.list(t.idx, ns, &lo.sel, ListAt::Latest, None, None)?;
                    for o in &page.items {
                        match store.delete_with(t.idx, o.namespace(), &o.name, &opts) {
                            Ok(_) => {}
                            Err(e) if e.code == 404 => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(json_response(faults, 200, list_body(&t.info, &page, false)))
                }
            }
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// Which options kind a write's query parameters are (`CreateOptions`, ...).
fn options_kind(method: &Method) -> &'static str {
    match *method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        _ => "DeleteOptions",
    }
}

/// 422 for bad write options, as the apiserver's `Validate*Options` reports them.
fn invalid_options(method: &Method, field: &str, reason: &str, detail: String) -> ApiError {
    let kind = options_kind(method);
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {detail}"),
    );
    e.details = Some(serde_json::json!({"group": "meta.k8s.io", "kind": kind,
        "causes": [{"reason": reason, "message": detail, "field": field}]}));
    e
}

/// `dryRun`, `fieldManager`, `fieldValidation` and `force`, checked as the apiserver checks them.
///
/// `fieldValidation` (1.25+): the simulator has no schemas, so `Ignore`, `Warn` and `Strict` are
/// accepted and change nothing (no unknown field is ever reported); other values are refused as
/// a 1.25+ server refuses them. (The 1.20 server ignores the parameter altogether.)
fn check_write_options(
    method: &Method,
    content_type: &str,
    query: &HashMap<String, String>,
) -> Result<(), ApiError> {
    if let Some(d) = query.get("dryRun")
        && d != "All"
    {
        return Err(invalid_options(
            method,
            "dryRun",
            "FieldValueNotSupported",
            format!("Unsupported value: []string{{{d:?}}}: supported values: \"All\""),
        ));
    }
    if *method == Method::DELETE {
        return Ok(());
    }
    if let Some(v) = query.get("fieldValidation")
        && !matches!(v.as_str(), "" | "Ignore" | "Warn" | "Strict")
    {
        return Err(invalid_options(
            method,
            "fieldValidation",
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {v:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            ),
        ));
    }
    let manager = query.get("fieldManager").map(String::as_str).unwrap_or("");
    if manager.chars().count() > 128 {
        return Err(invalid_options(
            method,
            "fieldManager",
            "FieldValueTooLong",
            "Too long: may not be longer than 128".into(),
        ));
    }
    let apply = *method == Method::PATCH && content_type == APPLY;
    if apply && manager.is_empty() {
        return Err(invalid_options(
            method,
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch".into(),
        ));
    }
    if !apply && *method == Method::PATCH && query.contains_key("force") {
        return Err(invalid_options(
            method,
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch".into(),
        ));
    }
    Ok(())
}

/// The apply patch media type.
const APPLY: &str = "application/apply-patch+yaml";

/// The patch kind of a PATCH's media type; `None` is server-side apply. Strategic merge is for
/// builtin kinds only: a custom resource answers 415 as the apiserver does.
fn patch_kind(info: &ResourceInfo, content_type: &str) -> Result<Option<PatchKind>, ApiError> {
    match content_type {
        "application/json-patch+json" => Ok(Some(PatchKind::Json)),
        "application/merge-patch+json" => Ok(Some(PatchKind::Merge)),
        "application/strategic-merge-patch+json" if info.builtin => Ok(Some(PatchKind::Strategic)),
        APPLY => Ok(None),
        // Any other type, strategic merge on a custom resource included: the 1.20 server's
        // bare message (the refusals test of the real-apiserver suite).
        _ => Err(unsupported_media_type()),
    }
}

/// The apiserver's 415 for a PATCH of a type the resource does not take.
fn unsupported_media_type() -> ApiError {
    ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
}

/// An apply body: YAML, of which the simulator reads only the JSON form.
async fn read_apply_body(req: Request<Incoming>) -> Result<Value, ApiError> {
    match read_json(req).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(ApiError::bad_request("the body of the request was empty")),
        Err(e) if e.code == 400 => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the simulator reads only the JSON form of YAML in an apply patch; send the configuration as JSON ({})",
                e.message
            ),
        )),
        Err(e) => Err(e),
    }
}

/// DeleteOptions from the body and the query (the query's win, as the apiserver decodes them).
fn delete_options(
    body: Option<&Value>,
    query: &HashMap<String, String>,
) -> Result<DeleteOpts, ApiError> {
    let field = |k: &str| body.and_then(|b| b.get(k)).filter(|v| !v.is_null());
    let mut propagation = field("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(p) = query.get("propagationPolicy") {
        propagation = Some(p.clone());
    }
    if propagation.is_none() {
        match field("orphanDependents").and_then(Value::as_bool) {
            Some(true) => propagation = Some("Orphan".into()),
            Some(false) => propagation = Some("Background".into()),
            None => {}
        }
    }
    if let Some(p) = &propagation
        && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
    {
        return Err(invalid_options(
            &Method::DELETE,
            "propagationPolicy",
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            ),
        ));
    }
    let mut grace_period = match field("gracePeriodSeconds") {
        Some(v) => Some(v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!("invalid value for gracePeriodSeconds: {v}"))
        })?),
        None => None,
    };
    if let Some(g) = query.get("gracePeriodSeconds") {
        grace_period = Some(g.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid value for gracePeriodSeconds: {g:?}"))
        })?);
    }
    let mut dry_run = query.contains_key("dryRun");
    if let Some(d) = field("dryRun") {
        let values: Vec<&str> = d
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if values.iter().any(|v| *v != "All") {
            return Err(invalid_options(
                &Method::DELETE,
                "dryRun",
                "FieldValueNotSupported",
                format!("Unsupported value: {values:?}: supported values: \"All\"")
                    .replace('[', "[]string{")
                    .replace(']', "}"),
            ));
        }
        dry_run |= !values.is_empty();
    }
    Ok(DeleteOpts {
        preconditions: field("preconditions").cloned(),
        propagation,
        grace_period,
        dry_run,
        immediate: false,
    })
}

/// Reads a dotted field path (`.spec.replicas`) from `v`.
fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(v, |cur, f| cur.get(f))
}

/// The label selector of a Deployment as a string (`matchLabels` and `matchExpressions`).
fn selector_string(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => parts.push(format!("{key} in ({})", values.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// The `autoscaling/v1` Scale of `parent`.
fn scale_of(info: &ResourceInfo, parent: &Value) -> Value {
    let Some(s) = &info.scale else {
        return Value::Null;
    };
    let meta = &parent["metadata"];
    let mut m = serde_json::Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(f) {
            m.insert(f.into(), v.clone());
        }
    }
    let spec_replicas = at_path(parent, &s.spec_replicas_path).and_then(Value::as_i64);
    let status_replicas = at_path(parent, &s.status_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = match &s.label_selector_path {
        Some(p) => at_path(parent, p)
            .and_then(Value::as_str)
            .map(str::to_string),
        None if info.builtin => parent["spec"].get("selector").map(selector_string),
        None => None,
    };
    let mut spec = serde_json::Map::new();
    if let Some(r) = spec_replicas.filter(|r| *r != 0) {
        spec.insert("replicas".into(), r.into());
    }
    let mut status = serde_json::json!({"replicas": status_replicas});
    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = sel.into();
    }
    serde_json::json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": m,
                       "spec": spec, "status": status})
}

/// `{name}/scale`: GET reads the parent's replicas as a Scale; PUT and PATCH write
/// `spec.replicas` (a resourceVersion in the Scale is a precondition).
async fn scale(
    shared: &Shared,
    t: &Target,
    method: &Method,
    content_type: &str,
    ctx: WriteCtx,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, ApiError> {
    let store = &shared.store;
    let ns = t.ns.as_deref();
    let name = t.name.as_deref().unwrap_or("");
    let Some(info_scale) = t.info.scale.clone() else {
        return Err(ApiError::path_not_found());
    };
    let current = || -> Result<Value, ApiError> {
        let obj = store.get(t.idx, ns, name)?;
        Ok(scale_of(&t.info, &obj.to_value(&t.info)))
    };
    let wanted = match *method {
        Method::GET => return Ok(value_response(&shared.faults, 200, &current()?)),
        Method::PUT => read_json(req)
            .await?
            .ok_or_else(|| ApiError::bad_request("the body of the request was empty"))?,
        Method::PATCH => {
            let kind = match content_type {
                "application/json-patch+json" => PatchKind::Json,
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    PatchKind::Merge
                }
                _ => return Err(unsupported_media_type()),
            };
            let patch = read_json(req)
                .await?
                .ok_or_else(|| ApiError::bad_request("the body of the request was empty"))?;
            let mut s = current()?;
            match kind {
                PatchKind::Json => crate::patch::json_patch(&mut s, &patch)?,
                _ => {
                    if let Some(m) = s["metadata"].as_object_mut() {
                        m.remove("resourceVersion");
                    }
                    crate::patch::merge_patch(&mut s, &patch)
                }
            }
            s
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    let replicas = match wanted["spec"].get("replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_i64()
            .filter(|r| (0..=i64::from(i32::MAX)).contains(r))
            .ok_or_else(|| {
                ApiError::invalid(
                    "Scale",
                    name,
                    "spec.replicas",
                    "FieldValueInvalid",
                    format!("Invalid value: {v}: must be greater than or equal to 0"),
                )
                .with_group("autoscaling")
            })?,
    };
    let precondition = wanted["metadata"]
        .get("resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let path: Vec<String> = info_scale
        .spec_replicas_path
        .trim_start_matches('.')
        .split('.')
        .map(str::to_string)
        .collect();
    let obj = store.update(t.idx, ns, name, &ctx, |old, _| {
        let mut v = old.clone();
        let mut cur = &mut v;
        for f in &path {
            if !cur.is_object() {
                *cur = serde_json::json!({});
            }
            cur = &mut cur[f.as_str()];
        }
        *cur = replicas.into();
        if let Some(m) = v["metadata"].as_object_mut() {
            m.insert("resourceVersion".into(), precondition.clone().into());
        }
        Ok(v)
    })?;
    Ok(value_response(
        &shared.faults,
        200,
        &scale_of(&t.info, &obj.to_value(&t.info)),
    ))
}

/// What DELETE answers once the object is gone: the deleted object for pods and namespaces
/// (their registries set `ReturnDeletedObject`), a `Success` Status otherwise (as the Endpoints
/// capture, and as 1.20 answers for custom resources).
fn delete_result(info: &ResourceInfo, obj: &Obj) -> Vec<u8> {
    // Custom resources answer a Status on 1.20 (the real-apiserver suite's custom resource
    // writes), though their registry is said to return the object.
    let returns_object = info.builtin && matches!(info.api.plural.as_ref(), "pods" | "namespaces");
    if returns_object {
        return obj.full(info);
    }
    // serde_json's map is ordered by key; write the apiserver's field order by hand.
    let mut out = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"#.to_vec();
    let _ = serde_json::to_writer(&mut out, &obj.name);
    if !info.api.group.is_empty() {
        out.extend_from_slice(b",\"group\":");
        let _ = serde_json::to_writer(&mut out, &info.api.group);
    }
    out.extend_from_slice(b",\"kind\":");
    let _ = serde_json::to_writer(&mut out, &info.api.plural);
    out.extend_from_slice(b",\"uid\":");
    let _ = serde_json::to_writer(&mut out, &obj.uid);
    out.extend_from_slice(b"}}");
    out
}

/// Parsed list/watch query parameters.
struct ListOptions {
    watch: bool,
    rv: Option<String>,
    rvm: Option<String>,
    limit: Option<usize>,
    cont: Option<String>,
    sel: Selectors,
    timeout: Option<Duration>,
    bookmarks: bool,
    send_initial: Option<bool>,
}

fn parse_bool(q: &HashMap<String, String>, key: &str) -> Result<Option<bool>, ApiError> {
    match q.get(key).map(String::as_str) {
        None | Some("") => Ok(None),
        Some("1" | "true" | "True" | "TRUE" | "t") => Ok(Some(true)),
        Some("0" | "false" | "False" | "FALSE" | "f") => Ok(Some(false)),
        Some(v) => Err(ApiError::bad_request(format!(
            "invalid value for {key}: {v:?}"
        ))),
    }
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

impl ListOptions {
    fn parse(q: &HashMap<String, String>, legacy_watch: bool) -> Result<ListOptions, ApiError> {
        let watch = legacy_watch || parse_bool(q, "watch")?.unwrap_or(false);
        let nonempty = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
        let rv = nonempty("resourceVersion");
        if let Some(rv) = &rv {
            parse_rv(rv)?;
        }
        let limit = match nonempty("limit") {
            Some(l) => match l.parse::<i64>() {
                Ok(n) if n > 0 => Some(n as usize),
                Ok(_) => None,
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid value for limit: {l:?}"
                    )));
                }
            },
            None => None,
        };
        let timeout = match nonempty("timeoutSeconds") {
            Some(t) => match t.parse::<u64>() {
                Ok(n) if n > 0 => Some(Duration::from_secs(n)),
                Ok(_) => None,
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid value for timeoutSeconds: {t:?}"
                    )));
                }
            },
            None => None,
        };
        let label =
            JsonLabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
                .map_err(ApiError::bad_request)?;
        let field = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let o = ListOptions {
            watch,
            rvm: nonempty("resourceVersionMatch"),
            cont: nonempty("continue"),
            rv,
            limit,
            sel: Selectors { label, field },
            timeout,
            bookmarks: parse_bool(q, "allowWatchBookmarks")?.unwrap_or(false),
            send_initial: parse_bool(q, "sendInitialEvents")?,
        };
        o.validate()?;
        Ok(o)
    }

    /// The apiserver's `ValidateListOptions` rules.
    fn validate(&self) -> Result<(), ApiError> {
        let bad = |f: &str, m: &str| Err(ApiError::invalid_list_options(f, m));
        if let Some(m) = &self.rvm {
            if m != "Exact" && m != "NotOlderThan" {
                return bad(
                    "resourceVersionMatch",
                    &format!(
                        "Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                    ),
                );
            }
            if self.rv.is_none() && self.send_initial.is_none() {
                return bad(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            if self.cont.is_some() {
                return bad(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if m == "Exact" && self.rv.as_deref() == Some("0") {
                return bad(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
        }
        if self.cont.is_some() && self.rv.as_deref().is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        match (self.watch, self.send_initial) {
            (false, Some(_)) => bad(
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for list",
            ),
            (true, Some(_)) if self.rvm.as_deref() != Some("NotOlderThan") => bad(
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ),
            (true, None) if self.rvm.is_some() => bad(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ),
            _ => Ok(()),
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

fn encode_token(rv: i64, start: &str) -> String {
    let t = Token {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.into(),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn decode_token(s: &str) -> Result<Token, ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|_| invalid("illegal base64 data"))?;
    let t: Token = serde_json::from_slice(&raw)
        .map_err(|_| invalid("incorrect encoded start resourceVersion"))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(invalid("server does not recognize this encoded key"));
    }
    if t.start.contains("..") || t.start.starts_with('/') {
        return Err(invalid("continue key is not valid"));
    }
    Ok(t)
}

/// Waits for the store to reach `rv`, else 504 Too large resource version.
async fn await_rv(shared: &Shared, rv: u64) -> Result<(), ApiError> {
    let reached = shared.store.wait_for_rv(rv, shared.cfg.rv_wait).await;
    if reached < rv {
        Err(ApiError::too_large_rv(rv, reached))
    } else {
        Ok(())
    }
}

async fn list(
    shared: &Shared,
    t: &Target,
    o: ListOptions,
    form: Form,
) -> Result<Response<SimBody>, ApiError> {
    let store = &shared.store;
    let ns = t.ns.as_deref();
    let rv_num = o.rv.as_deref().map(parse_rv).transpose()?;
    let (at, limit, start) = if let Some(c) = &o.cont {
        let tok = decode_token(c)?;
        if tok.rv >= 0 && (tok.rv as u64) < store.compacted_rv() {
            return Err(ApiError::continue_too_old(encode_token(-1, &tok.start)));
        }
        let at = if tok.rv < 0 {
            ListAt::Latest
        } else {
            ListAt::Exact(tok.rv as u64)
        };
        (at, o.limit, Some(tok.start))
    } else {
        match (o.rvm.as_deref(), rv_num) {
            (Some("Exact"), Some(x)) => {
                await_rv(shared, x).await?;
                (ListAt::Exact(x), o.limit, None)
            }
            (_, None) => (ListAt::Latest, o.limit, None),
            (None, Some(0)) => (ListAt::Latest, None, None),
            (None, Some(x)) if o.limit.is_some() => {
                await_rv(shared, x).await?;
                (ListAt::Exact(x), o.limit, None)
            }
            (_, Some(x)) => {
                await_rv(shared, x).await?;
                (ListAt::Latest, o.limit, None)
            }
        }
    };
    let page = store.list(t.idx, ns, &o.sel, at, limit, start.as_deref())?;
    if form.protobuf {
        let token = page
            .next_start
            .as_ref()
            .map(|start| encode_token(page.rv as i64, start));
        let remaining = token.as_ref().and(page.remaining).map(|r| r as i64);
        let body = protobuf::list_body(
            &t.info,
            form.metadata,
            &page.rv.to_string(),
            token.as_deref(),
            remaining,
            page.items.iter().map(|o| {
                let mut bare = Vec::with_capacity(o.rest.len() + 2);
                o.write_bare(&mut bare);
                bare
            }),
        );
        return Ok(protobuf_response(&shared.faults, body));
    }
    Ok(json_response(
        &shared.faults,
        200,
        list_body(&t.info, &page, form.metadata),
    ))
}

/// `{"kind":"PodList","apiVersion":"v1","metadata":{..},"items":[..]}` as the apiserver writes it;
/// with `metadata`, a `PartialObjectMetadataList` of the items' metadata.
fn list_body(info: &ResourceInfo, page: &Page, metadata: bool) -> Vec<u8> {
    let per_item: usize = page.items.iter().map(|o| o.rest.len() + 64).sum();
    let mut out = Vec::with_capacity(per_item + 256);
    let (kind, api_version) = if metadata {
        (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
        )
    } else {
        (format!("{}List", info.api.kind), info.api.api_version())
    };
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, &kind);
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &api_version);
    out.extend_from_slice(
        format!(",\"metadata\":{{\"resourceVersion\":\"{}\"", page.rv).as_bytes(),
    );
    if let Some(start) = &page.next_start {
        out.extend_from_slice(
            format!(",\"continue\":\"{}\"", encode_token(page.rv as i64, start)).as_bytes(),
        );
        if let Some(r) = page.remaining {
            out.extend_from_slice(format!(",\"remainingItemCount\":{r}").as_bytes());
        }
    }
    out.extend_from_slice(b"},\"items\":[");
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if metadata {
            let mut bare = Vec::with_capacity(o.rest.len() + 2);
            o.write_bare(&mut bare);
            out.extend_from_slice(&protobuf::partial_json(&bare));
        } else if info.builtin {
            o.write_bare(&mut out)
        } else {
            o.write_full(info, &mut out)
        }
    }
    out.extend_from_slice(b"]}");
    out
}

async fn watch(
    shared: &Shared,
    t: &Target,
    o: ListOptions,
    form: Form,
) -> Result<Response<SimBody>, ApiError> {
    let store = &shared.store;
    let rv_num = o.rv.as_deref().map(parse_rv).transpose()?;
    let from = match (o.send_initial, rv_num) {
        (Some(true), rv) => {
            if let Some(x) = rv.filter(|x| *x > 0) {
                await_rv(shared, x).await?;
            }
            WatchFrom::Current { initial: true }
        }
        (si, None | Some(0)) => WatchFrom::Current {
            initial: si != Some(false),
        },
        (_, Some(x)) => WatchFrom::Rv(x),
    };
    let start = if o.send_initial == Some(true) && shared.faults.watch_list_disabled() {
        Err(ApiError::watch_list_unsupported())
    } else {
        store.start_watch(t.idx, t.ns.as_deref(), from)
    };
    let params = WatchParams {
        resource: t.idx,
        ns: t.ns.clone(),
        sel: o.sel,
        bookmarks: o.bookmarks,
        bookmark_interval: shared.cfg.bookmark_interval,
        timeout: o.timeout.unwrap_or(shared.cfg.default_watch_timeout),
        initial_end_bookmark: o.send_initial == Some(true)
            && o.bookmarks
            && !shared.faults.initial_events_end_withheld(),
        initial_end_withheld: o.send_initial == Some(true)
            && shared.faults.initial_events_end_withheld(),
        form,
    };
    let body = watchstream::spawn(
        store.clone(),
        t.info.clone(),
        start,
        params,
        &shared.faults,
        shared.shutdown.clone(),
    );
    let mut response = base_response(200)
        .body(body)
        .unwrap_or_else(|_| Response::new(SimBody::empty()));
    if form.protobuf {
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(protobuf::WATCH_CONTENT_TYPE),
        );
    }
    Ok(response)
}

/// Decodes one key or value of a query string as `application/x-www-form-urlencoded` does: `+` is
/// a space, `%XX` a byte (invalid escapes stay as written), invalid UTF-8 becomes U+FFFD.
fn form_decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 clients connecting at once to a listener that accepts none of them: every connect
    /// completes well inside the 1 s a dropped SYN would cost (the kernel finishes the handshake
    /// for each connection the queue holds). With tokio's default queue of 128 most would wait
    /// out a SYN retransmit. Skipped where the kernel's limit is below 1,000.
    #[tokio::test]
    async fn a_thousand_connects_at_once_fit_the_listen_queue() {
        const CLIENTS: usize = 1000;
        if (listen_backlog() as usize) < CLIENTS {
            eprintln!("net.core.somaxconn < {CLIENTS}: skipped");
            return;
        }
        let listener = listen(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        let connects: Vec<_> = (0..CLIENTS)
            .map(|_| {
                tokio::spawn(tokio::time::timeout(
                    Duration::from_millis(900),
                    tokio::net::TcpStream::connect(addr),
                ))
            })
            .collect();
        let mut open = Vec::with_capacity(CLIENTS);
        for connect in connects {
            let stream = connect.await.unwrap().expect("a SYN was dropped").unwrap();
            open.push(stream);
        }
        assert_eq!(open.len(), CLIENTS);
        drop(listener);
    }

    #[test]
    fn token_matches_real_format() {
        // From real-1.20-list-endpoints-limit2-page1.http.
        assert_eq!(
            encode_token(79, "svc-2\0"),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NzksInN0YXJ0Ijoic3ZjLTJcdTAwMDAifQ"
        );
        let t =
            decode_token("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoic3ZjLTFcdTAwMDAifQ")
                .unwrap();
        assert_eq!((t.rv, t.start.as_str()), (-1, "svc-1\0"));
        assert!(decode_token("!!!").is_err());
        assert!(decode_token("e30").is_err());
    }
}
