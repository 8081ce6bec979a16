//! Every write of `Api` against the real apiserver: the same scenario the simulator runs
//! (`tests/support/writes.rs`), so the two are held to one set of answers.

use crate::support::real_apiserver::*;
use crate::support::writes;

#[tokio::test]
async fn every_write_on_a_lean_kind() {
    let real = real_or_skip!("every_write_on_a_lean_kind");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "writes").await;
        writes::lean_kind_writes(&client, &ns).await;
    })
    .await;
}

#[tokio::test]
async fn every_write_on_a_k8s_openapi_kind() {
    let real = real_or_skip!("every_write_on_a_k8s_openapi_kind");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "k8s-openapi").await;
        writes::k8s_openapi_writes(&client, &ns).await;
    })
    .await;
}

#[tokio::test]
async fn a_finalizer_holds_an_object_until_cleanup() {
    let real = real_or_skip!("a_finalizer_holds_an_object_until_cleanup");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "finalizer").await;
        writes::finalizer_flow(&client, &ns).await;
    })
    .await;
}

/// Every refusal of a write, sent as raw HTTP to the real apiserver and to the simulator: the
/// code, reason, message and causes must be the same (the namespace's name normalized away).
#[tokio::test]
async fn the_simulator_refuses_writes_as_the_real_apiserver_does() {
    let real = real_or_skip!("the_simulator_refuses_writes_as_the_real_apiserver_does");
    bounded(60, async {
        let sim = informer_sim::Simulator::start().await.unwrap();
        let sim_client =
            informer::Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
        let from_real = refusals(&real.client()).await;
        let from_sim = refusals(&sim_client).await;
        let mut differences = Vec::new();
        for ((step, real_answer), (_, sim_answer)) in from_real.iter().zip(&from_sim) {
            if real_answer != sim_answer {
                differences.push(format!(
                    "{step}:\n  real: {real_answer}\n  sim:  {sim_answer}"
                ));
            }
        }
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    })
    .await;
}

/// The refusals, each as `(step, {code, reason, message, causes})`. Left out: an apply whose
/// `kind` is another resource's, which 1.20 answers with a 500 printing Go pointers (the
/// simulator answers the 400 of later servers).
async fn refusals(client: &informer::Client) -> Vec<(String, serde_json::Value)> {
    use bytes::Bytes;
    use hyper::Method;
    use serde_json::{Value, json};

    let ns = namespace(client, "refusals").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let one = format!("{cms}/c1");
    let mut out = Vec::new();
    let send = |method: Method, path: String, ct: &'static str, body: Value| {
        let client = client.clone();
        async move {
            let body = Bytes::from(serde_json::to_vec(&body).unwrap());
            client
                .request::<Value>(method, &path, Some((body, ct)))
                .await
        }
    };
    let json_ct = "application/json";
    let created = send(
        Method::POST,
        cms.clone(),
        json_ct,
        json!({"metadata": {"name": "c1"}, "data": {"a": "1"}}),
    )
    .await
    .unwrap();
    let rv = created["metadata"]["resourceVersion"].clone();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let applied = send(
        Method::PATCH,
        format!("{one}?fieldManager=alpha"),
        "application/apply-patch+yaml",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"k": "v"}}),
    )
    .await
    .unwrap();
    // The versions quoted in messages, as names: the two servers count differently.
    let versions = [
        (rv.as_str().unwrap().to_owned(), "RV1"),
        (
            applied["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
            "RV2",
        ),
    ];
    let steps: Vec<(&str, Method, String, &'static str, Value)> = vec![
        (
            "create a duplicate",
            Method::POST,
            cms.clone(),
            json_ct,
            json!({"metadata": {"name": "c1"}}),
        ),
        (
            "create an invalid name",
            Method::POST,
            cms.clone(),
            json_ct,
            json!({"metadata": {"name": "Not_A_Name"}}),
        ),
        (
            "create without a name",
            Method::POST,
            cms.clone(),
            json_ct,
            json!({"metadata": {}}),
        ),
        (
            "replace at a stale version",
            Method::PUT,
            one.clone(),
            json_ct,
            json!({"metadata": {"name": "c1", "resourceVersion": rv}}),
        ),
        (
            "replace another name",
            Method::PUT,
            one.clone(),
            json_ct,
            json!({"metadata": {"name": "c2"}}),
        ),
        (
            "json patch, failed test",
            Method::PATCH,
            one.clone(),
            "application/json-patch+json",
            json!([{"op": "test", "path": "/data/a", "value": "2"}]),
        ),
        (
            "json patch, missing path",
            Method::PATCH,
            one.clone(),
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/data/nope"}]),
        ),
        (
            "json patch, not a list",
            Method::PATCH,
            one.clone(),
            "application/json-patch+json",
            json!({"op": "remove"}),
        ),
        (
            "merge patch of a missing object",
            Method::PATCH,
            format!("{cms}/missing"),
            "application/merge-patch+json",
            json!({"data": {"a": "1"}}),
        ),
        (
            "apply without a field manager",
            Method::PATCH,
            one.clone(),
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}}),
        ),
        (
            "apply in conflict",
            Method::PATCH,
            format!("{one}?fieldManager=beta"),
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"k": "w"}}),
        ),
        (
            "force on a merge patch",
            Method::PATCH,
            format!("{one}?force=true"),
            "application/merge-patch+json",
            json!({}),
        ),
        (
            "dryRun of an unknown value",
            Method::POST,
            format!("{cms}?dryRun=Maybe"),
            json_ct,
            json!({"metadata": {"name": "c9"}}),
        ),
        (
            "an unknown patch type",
            Method::PATCH,
            one.clone(),
            "text/plain",
            json!({}),
        ),
        (
            "delete with another uid",
            Method::DELETE,
            one.clone(),
            json_ct,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "x"}}),
        ),
        (
            "delete at a stale version",
            Method::DELETE,
            one.clone(),
            json_ct,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}}),
        ),
        (
            "delete with an unknown propagation",
            Method::DELETE,
            one.clone(),
            json_ct,
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Sideways"}),
        ),
        (
            "delete a collection across namespaces",
            Method::DELETE,
            "/api/v1/configmaps?labelSelector=nothing-matches".to_owned(),
            json_ct,
            json!({}),
        ),
        (
            "delete of a missing object",
            Method::DELETE,
            format!("{cms}/missing"),
            json_ct,
            json!({}),
        ),
    ];
    for (step, method, path, ct, body) in steps {
        let answer = match send(method, path, ct, body).await {
            Ok(v) => json!({"accepted": v["kind"]}),
            Err(e) => match e.status() {
                Some(s) => {
                    let causes: Vec<Value> = s
                        .causes()
                        .iter()
                        .map(|c| json!([c.reason, c.field, c.message]))
                        .collect();
                    json!({"code": s.code, "reason": s.reason, "message": s.message, "causes": causes})
                }
                None => json!({"error": e.to_string()}),
            },
        };
        let mut text = answer.to_string().replace(&ns, "NS").replace(&uid, "UID");
        for (version, name) in &versions {
            text = text.replace(&format!("({version})"), &format!("({name})"));
        }
        out.push((step.to_owned(), serde_json::from_str(&text).unwrap()));
    }
    out
}

#[tokio::test]
async fn every_write_on_a_custom_resource() {
    let real = real_or_skip!("every_write_on_a_custom_resource");
    bounded(90, async {
        let client = real.client();
        let ns = namespace(&client, "crd-writes").await;
        writes::custom_resource_writes(&client, &ns).await;
    })
    .await;
}

#[tokio::test]
async fn a_custom_resource_typed_on_k8s_openapi_metadata() {
    let real = real_or_skip!("a_custom_resource_typed_on_k8s_openapi_metadata");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "typed-cr").await;
        writes::typed_custom_resource(&client, &ns).await;
    })
    .await;
}
