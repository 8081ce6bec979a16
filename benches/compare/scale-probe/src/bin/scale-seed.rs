//! `scale-seed --server URL --n N [--per-ns 10]`: creates namespaces `ns-00000`.. with ConfigMaps
//! `cm-00`..`cm-09` each, over one plain HTTP/1.1 connection, before a client of scale.sh starts.
fn main() {
    let url = scale_probe::arg("--server").expect("--server URL");
    let n: usize = scale_probe::arg("--n").expect("--n N").parse().unwrap();
    let per_ns: usize = scale_probe::arg("--per-ns")
        .map(|v| v.parse().unwrap())
        .unwrap_or(scale_probe::PER_NS);
    let t = std::time::Instant::now();
    scale_probe::seed(&url, n, per_ns);
    eprintln!(
        "scale-seed: {n} namespaces x {per_ns} ConfigMaps in {:.2}s",
        t.elapsed().as_secs_f64()
    );
}
