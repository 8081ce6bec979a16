//! `kwatch get RESOURCE [NAME]`: lists from a synced informer (never a plain LIST), as a kubectl
//! style table (NAMESPACE, NAME, a STATUS-like column when the objects have one, AGE), a JSON
//! `List`, or one JSON object per line. With NAME the informer watches only that object
//! (`metadata.name` field selector) and a missing object is an error.

use std::sync::Arc;

use informer::reflector::ReflectorOptions;
use informer::{Informer, JsonObject, Object};
use serde_json::json;

use super::args::{Format, GetArgs, Global};
use super::connect::{self, ErrorCollector};
use super::output::{Out, age};
use super::{CliError, CliResult, resolve};

pub async fn run(global: &Global, args: GetArgs) -> CliResult {
    let (client, namespace) = connect::connect(global).await?;
    let resource = resolve::resolve(&client, &args.resource).await?;
    let errors = ErrorCollector::default();
    let field_selector = match (&args.name, &args.field_selector) {
        (Some(n), Some(f)) => Some(format!("metadata.name={n},{f}")),
        (Some(n), None) => Some(format!("metadata.name={n}")),
        (None, f) => f.clone(),
    };
    let options = ReflectorOptions {
        label_selector: args.label_selector.clone(),
        field_selector,
        on_error: Some(errors.callback()),
        ..connect::reflector_options()
    };
    let informer = Informer::dynamic(client, &resource, namespace.as_deref(), options);
    informer.start();
    let what = format!("get {}", resource.plural);
    errors
        .wait_for_sync(
            async { informer.wait_for_sync(connect::SYNC_TIMEOUT).await.is_ok() },
            &what,
        )
        .await?;
    let mut objects: Vec<Arc<JsonObject>> = informer.store().list();
    informer.stop();
    let list_rv = informer
        .health()
        .initial_list
        .map(|l| l.resource_version)
        .unwrap_or_default();
    objects.sort_by_key(|o| (o.meta().namespace.clone(), o.meta().name.clone()));
    if let Some(name) = &args.name {
        if objects.is_empty() {
            return Err(CliError::Runtime(format!(
                "{} \"{name}\" not found{}",
                resource.plural,
                match (&namespace, resource.namespaced) {
                    (Some(ns), true) => format!(" in namespace {ns}"),
                    _ => String::new(),
                }
            )));
        }
    }
    let mut out = Out::stdout();
    match args.output {
        Format::Json if args.name.is_some() && objects.len() == 1 => {
            // Through a tree: the members are pretty-printed too.
            out.json_pretty(
                &serde_json::to_value(&*objects[0])
                    .map_err(|e| CliError::Runtime(e.to_string()))?,
            )?
        }
        Format::Json => out.json_pretty(&json!({
            "apiVersion": "v1",
            "kind": "List",
            // The list's version (the store may be past it by a few events).
            "metadata": {"resourceVersion": list_rv},
            "items": objects.iter().map(|o| &**o).collect::<Vec<&JsonObject>>(),
        }))?,
        Format::Jsonl => {
            for o in &objects {
                out.json_line(&**o)?;
            }
        }
        _ => print_table(
            &mut out,
            &objects,
            namespace.is_none() && resource.namespaced,
        )?,
    }
    out.flush()
}

/// `status.phase` when the objects have one (Pods, Namespaces, PVCs...).
fn status_of(o: &JsonObject) -> Option<String> {
    match o.get("status.phase")? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

fn print_table(out: &mut Out, objects: &[Arc<JsonObject>], with_namespace: bool) -> CliResult {
    if objects.is_empty() {
        eprintln!("No resources found.");
        return Ok(());
    }
    let with_status = objects.iter().any(|o| status_of(o).is_some());
    let mut headers = Vec::new();
    if with_namespace {
        headers.push("NAMESPACE");
    }
    headers.push("NAME");
    if with_status {
        headers.push("STATUS");
    }
    headers.push("AGE");
    let rows: Vec<Vec<String>> = objects
        .iter()
        .map(|o| {
            let m = o.meta();
            let mut row = Vec::new();
            if with_namespace {
                row.push(m.namespace.clone());
            }
            row.push(m.name.clone());
            if with_status {
                row.push(status_of(o).unwrap_or_default());
            }
            row.push(age(m.creation_timestamp.as_deref()));
            row
        })
        .collect();
    out.table(&headers, &rows)
}
