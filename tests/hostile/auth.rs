//! 401 and 403 against the simulator over real HTTP: each failure reaches the error callback and
//! the health snapshot with the server's own message, the informer keeps retrying (it does not
//! declare a sync it has not had), and it syncs once the server lets it in.

use std::time::Duration;

use informer::config::{Auth, Secret};
use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Api, Client, Config, ConfigMap, Error, Informer};
use informer_sim::Simulator;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

/// One reported failure: `(HTTP code, Status reason, Status message)`.
type Failure = (Option<u16>, String, String);

/// An informer of the `default` configmaps whose failures arrive on the returned channel.
fn informer(client: Client) -> (Informer<ConfigMap>, mpsc::UnboundedReceiver<Failure>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = ReflectorOptions {
        backoff: BackoffOptions {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
            ..Default::default()
        },
        on_error: Some(std::sync::Arc::new(move |e: &Error| {
            let (reason, message) = match e {
                Error::Api(s) => (s.reason.clone(), s.message.clone()),
                other => (String::new(), other.to_string()),
            };
            let _ = tx.send((e.http_code(), reason, message));
        })),
        ..Default::default()
    };
    (
        Informer::new(Api::namespaced(client, "default"), options),
        rx,
    )
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Failure>) -> Failure {
    timeout(LIMIT, rx.recv())
        .await
        .expect("a failure is reported")
        .expect("the informer is alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_reaches_the_callback_and_health_with_the_servers_message() {
    let sim = Simulator::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "a"}}),
    )
    .unwrap();
    sim.faults().forbid_reads(true);
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    let (inf, mut failures) = informer(client);
    inf.start();
    // The verb is the request's: `watch` for a streaming list, `list` for a paginated one.
    let rbac_message = |m: &str| {
        m.starts_with("configmaps is forbidden: User \"reader\" cannot ")
            && m.ends_with(
                " resource \"configmaps\" in API group \"\" in the namespace \"default\"",
            )
    };
    for _ in 0..2 {
        let (code, reason, message) = next(&mut failures).await;
        assert_eq!(
            (code, reason.as_str()),
            (Some(403), "Forbidden"),
            "{message}"
        );
        assert!(rbac_message(&message), "every retry is reported: {message}");
    }
    let health = inf.metrics().reflector;
    assert!(health.consecutive_failures >= 2, "{health:?}");
    let last = health.last_error.clone().unwrap_or_default();
    assert!(
        last.contains("403 Forbidden: configmaps is forbidden: User \"reader\" cannot "),
        "{health:?}"
    );
    assert!(!inf.has_synced());
    assert_eq!(inf.store().len(), 0);

    sim.faults().forbid_reads(false);
    inf.wait_for_sync(LIMIT).await.unwrap();
    assert!(inf.store().get("default", "a").is_some());
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_reaches_the_callback_and_health() {
    let sim = Simulator::builder().token("right").start().await.unwrap();
    let mut config = Config::new(sim.url().parse().unwrap());
    config.auth = Auth::Bearer(Secret::new("wrong".to_owned()));
    let (inf, mut failures) = informer(Client::new(config).unwrap());
    inf.start();
    for _ in 0..2 {
        assert_eq!(
            next(&mut failures).await,
            (
                Some(401),
                "Unauthorized".to_owned(),
                "Unauthorized".to_owned()
            )
        );
    }
    let health = inf.metrics().reflector;
    assert!(health.consecutive_failures >= 2, "{health:?}");
    assert!(
        health
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("401 Unauthorized")),
        "{health:?}"
    );
    assert!(!inf.has_synced());
    inf.stop();
}
