//! The differential check: one scripted sequence of writes, run over HTTP against any server, and
//! everything the server said recorded in a comparable form (write answers, watch events with and
//! without a label selector, the final LIST). Uids, timestamps, managedFields, the namespace's name
//! and absolute resourceVersions are normalized away; the *order* of resourceVersions is kept by
//! replacing each with its rank among all versions the run saw.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use informer::client::ResponseBody;
use informer::{Api, Client, DynamicObject, ListParams, WatchParams};
use serde_json::{Value, json};

use crate::support::real_apiserver::{cm_path, configmap, namespace};

/// What one server answered to the script, normalized.
#[derive(Debug)]
pub struct Transcript {
    /// `step: answer` for every request of the script.
    pub answers: Vec<(String, Value)>,
    /// Every event of a watch over the namespace, in order.
    pub all_events: Vec<Value>,
    /// Every event of a `sel=yes` watch, in order.
    pub selected_events: Vec<Value>,
    /// The final LIST and a first page of size 2.
    pub final_list: Value,
    pub first_page: Value,
}

/// Runs the script against the server behind `client`.
pub async fn run_script(client: &Client) -> Transcript {
    let ns = namespace(client, "diff").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        informer::ApiResource::new("", "v1", "ConfigMap", "configmaps", true),
    );
    let start = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version;
    let mut all = api
        .watch(&WatchParams::default().resource_version(&start))
        .await
        .unwrap();
    let mut selected = api
        .watch(
            &WatchParams::default()
                .labels("sel=yes")
                .resource_version(&start),
        )
        .await
        .unwrap();

    let yes = json!({"sel": "yes"});
    let mut answers = Vec::new();
    let mut step = |name: &str, v: Value| answers.push((name.to_owned(), v));
    let p = |name: Option<&str>| cm_path(&ns, name);
    step(
        "create a",
        send(
            client,
            Method::POST,
            &p(None),
            Some(configmap("a", yes.clone(), json!({"x": "0"}))),
        )
        .await,
    );
    step(
        "create b",
        send(
            client,
            Method::POST,
            &p(None),
            Some(configmap("b", yes.clone(), json!({"x": "0"}))),
        )
        .await,
    );
    step(
        "create c",
        send(
            client,
            Method::POST,
            &p(None),
            Some(configmap("c", yes.clone(), json!({}))),
        )
        .await,
    );
    step(
        "patch a",
        patch(client, &p(Some("a")), json!({"data": {"x": "1"}})).await,
    );
    step(
        "patch a again",
        patch(
            client,
            &p(Some("a")),
            json!({"data": {"x": null, "y": "2"}, "metadata": {"annotations": {"n": "2"}}}),
        )
        .await,
    );
    step(
        "relabel b out",
        patch(
            client,
            &p(Some("b")),
            json!({"metadata": {"labels": {"sel": "no"}}}),
        )
        .await,
    );
    step(
        "delete c",
        send(client, Method::DELETE, &p(Some("c")), None).await,
    );
    let b = send(client, Method::GET, &p(Some("b")), None).await;
    step("get b", b.clone());
    let mut b_back = b.clone();
    b_back["metadata"]["labels"]["sel"] = json!("yes");
    b_back["data"] = json!({"x": "3"});
    step(
        "put b back in",
        send(client, Method::PUT, &p(Some("b")), Some(b_back)).await,
    );
    let mut stale = b;
    stale["data"] = json!({"x": "stale"});
    step(
        "put b with a stale version",
        send(client, Method::PUT, &p(Some("b")), Some(stale)).await,
    );
    step(
        "create a twice",
        send(
            client,
            Method::POST,
            &p(None),
            Some(configmap("a", json!({}), json!({}))),
        )
        .await,
    );
    step(
        "delete c twice",
        send(client, Method::DELETE, &p(Some("c")), None).await,
    );
    step(
        "get c",
        send(client, Method::GET, &p(Some("c")), None).await,
    );
    step(
        "create end",
        send(
            client,
            Method::POST,
            &p(None),
            Some(configmap("end", yes, json!({}))),
        )
        .await,
    );

    let all_events = events_until_end(&mut all).await;
    let selected_events = events_until_end(&mut selected).await;
    // A list's own version is the server's current one, which other tests' writes move on the real
    // server: check it is not older than the script's last write, then leave it out.
    let last = crate::support::real_apiserver::rv_of(&answers.last().unwrap().1);
    let mut final_list = send(client, Method::GET, &p(None), None).await;
    let mut first_page = send(client, Method::GET, &format!("{}?limit=2", p(None)), None).await;
    for list in [&mut final_list, &mut first_page] {
        let rv = list["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion")
            .unwrap();
        assert!(
            rv.as_str().unwrap().parse::<u64>().unwrap() >= last,
            "list RV {rv} < {last}"
        );
    }
    normalize(
        Transcript {
            answers,
            all_events,
            selected_events,
            final_list,
            first_page,
        },
        &ns,
    )
}

/// A request's JSON answer, or the `Status` of its error (as the server sent it).
async fn send(client: &Client, method: Method, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| {
        (
            Bytes::from(serde_json::to_vec(&b).unwrap()),
            "application/json",
        )
    });
    match client.request::<Value>(method, path, body).await {
        Ok(v) => v,
        Err(e) => {
            serde_json::to_value(e.status().unwrap_or_else(|| panic!("{path}: {e}"))).unwrap()
        }
    }
}

async fn patch(client: &Client, path: &str, body: Value) -> Value {
    let body = (
        Bytes::from(serde_json::to_vec(&body).unwrap()),
        "application/merge-patch+json",
    );
    client
        .request::<Value>(Method::PATCH, path, Some(body))
        .await
        .unwrap()
}

/// Raw watch events up to and including the ADDED of configmap `end`.
async fn events_until_end(
    stream: &mut informer::client::WatchStream<DynamicObject, ResponseBody>,
) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), stream.next_frame())
            .await
            .expect("no event within 20 s")
            .expect("watch ended early")
            .unwrap();
        let ev: Value = serde_json::from_slice(&frame.bytes).unwrap();
        if ev["type"] == "BOOKMARK" {
            continue;
        }
        let end = ev["type"] == "ADDED" && ev["object"]["metadata"]["name"] == "end";
        out.push(ev);
        if end {
            return out;
        }
    }
}

/// Replaces what legitimately differs between servers (and runs) with placeholders.
fn normalize(mut t: Transcript, ns: &str) -> Transcript {
    let mut rvs = Vec::new();
    {
        let mut visit = |v: &mut Value| strip(v, ns, &mut rvs);
        t.answers.iter_mut().for_each(|(_, v)| visit(v));
        t.all_events.iter_mut().for_each(&mut visit);
        t.selected_events.iter_mut().for_each(&mut visit);
        visit(&mut t.final_list);
        visit(&mut t.first_page);
    }
    // Rank the versions: "RV" placeholders become "rv#<rank>" in numeric order.
    let mut sorted: Vec<u64> = rvs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let rank: BTreeMap<u64, usize> = sorted.iter().enumerate().map(|(i, rv)| (*rv, i)).collect();
    let mut it = rvs.into_iter();
    let mut fill = |v: &mut Value| fill_ranks(v, &mut it, &rank);
    t.answers.iter_mut().for_each(|(_, v)| fill(v));
    t.all_events.iter_mut().for_each(&mut fill);
    t.selected_events.iter_mut().for_each(&mut fill);
    fill(&mut t.final_list);
    fill(&mut t.first_page);
    t
}

/// Drops uid/timestamps/managedFields, renames the namespace, and collects resourceVersions (in
/// document order) replacing each by `"RV"`.
fn strip(v: &mut Value, ns: &str, rvs: &mut Vec<u64>) {
    match v {
        Value::Object(m) => {
            for k in ["uid", "creationTimestamp", "managedFields", "selfLink"] {
                m.remove(k);
            }
            if let Some(Value::String(c)) = m.get_mut("continue") {
                if !c.is_empty() {
                    *c = "TOKEN".into();
                }
            }
            for (k, x) in m.iter_mut() {
                if k == "resourceVersion" {
                    if let Some(n) = x.as_str().and_then(|s| s.parse().ok()) {
                        rvs.push(n);
                        *x = json!("RV");
                        continue;
                    }
                }
                strip(x, ns, rvs);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, ns, rvs)),
        Value::String(s) if s.contains(ns) => *s = s.replace(ns, "NS"),
        _ => {}
    }
}

fn fill_ranks(v: &mut Value, it: &mut impl Iterator<Item = u64>, rank: &BTreeMap<u64, usize>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "resourceVersion" && *x == "RV" {
                    *x = json!(format!("rv#{}", rank[&it.next().unwrap()]));
                } else {
                    fill_ranks(x, it, rank);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| fill_ranks(x, it, rank)),
        _ => {}
    }
}

/// Fails with every difference, each shown as the real server's and the simulator's JSON.
pub fn assert_same(real: &Transcript, sim: &Transcript) {
    let mut diffs = Vec::new();
    let mut cmp = |what: String, r: &Value, s: &Value| {
        if r != s {
            diffs.push(format!("{what}:\n  real: {r}\n  sim:  {s}"));
        }
    };
    for (i, ((step, r), (_, s))) in real.answers.iter().zip(&sim.answers).enumerate() {
        cmp(format!("answer {i} ({step})"), r, s);
    }
    let events = |e: &[Value]| Value::Array(e.to_vec());
    for (name, r, s) in [
        ("watch", &real.all_events, &sim.all_events),
        ("watch sel=yes", &real.selected_events, &sim.selected_events),
    ] {
        let n = r.len().max(s.len());
        for i in 0..n {
            cmp(
                format!("{name} event {i}"),
                r.get(i).unwrap_or(&Value::Null),
                s.get(i).unwrap_or(&Value::Null),
            );
        }
        if r.len() != s.len() {
            cmp(format!("{name}: all events"), &events(r), &events(s));
        }
    }
    cmp("final list".into(), &real.final_list, &sim.final_list);
    cmp("first page of 2".into(), &real.first_page, &sim.first_page);
    assert!(
        diffs.is_empty(),
        "the simulator differs from the real apiserver:\n{}",
        diffs.join("\n")
    );
}

/// The custom resource whose watch cache [`error_answers`] asks for a version older than it holds.
///
/// Whether a 1.20 apiserver refuses a watch from a very old resourceVersion depends on its watch
/// cache (`watchCache.GetAllEventsSinceThreadUnsafe`): it refuses `rv < oldest - 1`, where
/// `oldest - 1` is the version of the list the cache was built from while no event has left its
/// window (at least 100 events, growing while they are younger than 75 s), and the version before
/// its first buffered event after that. The built-in resources' caches are built at start-up, when
/// etcd is fresh (a list at version 1 or so), so `resourceVersion=1` is accepted by a young server
/// and refused once enough writes have aged: it depends on the server's age and on which tests ran
/// before. A custom resource's cache is built when it is first served, from a list at the then
/// current version, so on every server that has written anything `resourceVersion=1` is too old.
pub fn probe_resource() -> informer::ApiResource {
    informer::ApiResource::new("differential.informer.test", "v1", "Probe", "probes", true)
}

/// Makes the real server serve [`probe_resource`]: creates its CRD (or finds it from an earlier
/// run), then waits until a LIST of it answers, which is also what builds its watch cache.
pub async fn serve_probes_on_real(client: &Client) {
    let r = probe_resource();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", r.plural, r.group)},
        "spec": {
            "group": r.group,
            "scope": "Namespaced",
            "names": {"plural": r.plural, "singular": "probe", "kind": r.kind},
            "versions": [{
                "name": r.version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true
                }}
            }]
        }
    });
    let answer = send(
        client,
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(crd),
    )
    .await;
    assert!(
        answer["kind"] == "CustomResourceDefinition" || answer["reason"] == "AlreadyExists",
        "{answer}"
    );
    // A new CRD is served once it is Established, a moment after its creation: ask until then.
    let path = format!("/apis/{}/{}/{}", r.group, r.version, r.plural);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.request::<Value>(Method::GET, &path, None).await {
            Ok(_) => return,
            Err(e) if e.http_code() == Some(404) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{path} is not served: {e}"),
        }
    }
}

/// Makes the simulator serve [`probe_resource`] the way [`serve_probes_on_real`] leaves the real
/// server: after some writes (the real one wrote its bootstrap objects), so the resource's watch
/// cache starts at a version later than 1.
pub fn serve_probes_on_sim(sim: &informer_sim::Simulator) {
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "before-probes"}}),
    )
    .unwrap();
    sim.register_resource(probe_resource(), &[]);
}

/// Answers to requests the apiserver refuses, normalized (namespace renamed, numbers in messages
/// replaced by `N`): `(request, HTTP status, body or first watch event)`.
pub async fn error_answers(client: &Client) -> Vec<(String, u16, Value)> {
    let ns = namespace(client, "differr").await;
    let cms = cm_path(&ns, None);
    let probe = probe_resource();
    let probes = format!(
        "/apis/{}/{}/namespaces/{ns}/{}",
        probe.group, probe.version, probe.plural
    );
    let now: u64 = get_rv(client, &cms).await;
    let requests = [
        (
            Method::GET,
            format!("{cms}?resourceVersionMatch=Exact"),
            None,
        ),
        (Method::GET, format!("{cms}?labelSelector=a+in"), None),
        (
            Method::GET,
            // Older than the resource's watch cache on both (see `probe_resource`).
            format!("{probes}?resourceVersion=1&watch=true"),
            None,
        ),
        (
            Method::GET,
            format!(
                "{cms}?resourceVersion={}&resourceVersionMatch=NotOlderThan",
                now + 1_000_000
            ),
            None,
        ),
        (Method::GET, format!("{cms}/missing"), None),
        (
            Method::POST,
            cms.clone(),
            Some(configmap("Bad_Name", json!({}), json!({}))),
        ),
        (
            Method::POST,
            cms.clone(),
            Some(json!({"metadata": {"name": "x", "namespace": "elsewhere"}})),
        ),
    ];
    let mut out = Vec::new();
    for (method, path, body) in requests {
        let what = format!(
            "{method} {}",
            path.replace(&ns, "NS")
                .replace(&(now + 1_000_000).to_string(), "FUTURE")
        );
        let body = body.map(|b| {
            (
                Bytes::from(serde_json::to_vec(&b).unwrap()),
                "application/json",
            )
        });
        let (code, mut value) = match client.send(method, &path, body).await {
            Ok(resp) => {
                // A watch: the answer is its first event.
                let code = resp.status().as_u16();
                let mut stream = informer::client::WatchStream::<DynamicObject, _>::new(
                    resp.into_body(),
                    1 << 20,
                );
                match tokio::time::timeout(Duration::from_secs(5), stream.next_frame()).await {
                    Ok(frame) => (
                        code,
                        serde_json::from_slice(&frame.unwrap().unwrap().bytes).unwrap(),
                    ),
                    Err(_) => (code, json!("no event within 5 s")),
                }
            }
            Err(e) => (
                e.http_code().unwrap_or(0),
                serde_json::to_value(e.status().unwrap_or_else(|| panic!("{what}: {e}"))).unwrap(),
            ),
        };
        scrub_numbers(&mut value, &ns);
        out.push((what, code, value));
    }
    out
}

async fn get_rv(client: &Client, path: &str) -> u64 {
    let list: Value = client.request(Method::GET, path, None).await.unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Renames the namespace and turns every run of digits in a string into `N`.
fn scrub_numbers(v: &mut Value, ns: &str) {
    match v {
        Value::Object(m) => m.values_mut().for_each(|x| scrub_numbers(x, ns)),
        Value::Array(a) => a.iter_mut().for_each(|x| scrub_numbers(x, ns)),
        Value::String(s) => {
            let mut out = String::new();
            for c in s.replace(ns, "NS").chars() {
                if c.is_ascii_digit() {
                    if !out.ends_with('N') {
                        out.push('N');
                    }
                } else {
                    out.push(c);
                }
            }
            *s = out;
        }
        _ => {}
    }
}
