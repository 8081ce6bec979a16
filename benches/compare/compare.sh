#!/usr/bin/env bash
# Side by side, in one run: kube-rs 5.0's reflector, client-go 1.37 (the shared kit's static
# binary; protobuf, as its typed clients ask), this repository's library typed (informer-peer: on
# protobuf, and as `informer-json` on JSON), the same through a dynamic informer (informer-peer
# --mode dynamic: JsonObject, what CRD informers use; client `informer-dyn`) and `kwatch watch -o
# none` on the resource, against one wire-server stream (protobuf to the clients that ask for it),
# ROUNDS rounds interleaved. Prints each run's JSON line, a median table and
# a last line `MEDIANS {client: {figure: median}}`.
#   ./compare.sh [--kind endpoints|endpointslices|pods] [--objects N] [--events M] [--rounds R]
#                [--hot-keys K] [--clients "kube-rs client-go informer informer-json informer-dyn kwatch"]
# (`informer-k8s` in --clients: informer-peer --mode k8s-openapi, k8s-openapi's types in the
# typed informer)
# The first run builds the workspace (kube-rs and k8s-openapi take a few minutes on 2 cores).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kind=endpoints objects=10000 events=200000 rounds=3 extra=() clients="kube-rs client-go informer informer-json informer-dyn kwatch"
while [ $# -gt 0 ]; do case "$1" in
  --kind) kind=$2; shift 2;; --objects) objects=$2; shift 2;; --events) events=$2; shift 2;;
  --rounds) rounds=$2; shift 2;; --hot-keys) extra+=(--hot-keys "$2"); shift 2;;
  --clients) clients=$2; shift 2;;
  *) echo "compare.sh: unknown $1" >&2; exit 2;; esac; done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
(cd "$here" && cargo build --release -q -j 2) >&2
# kwatch from this checkout (its own workspace, the repository root).
case " $clients " in *" kwatch "*) (cd "$here/../.." && cargo build --release -q -j 2 -p kwatch) >&2;; esac
bin="$CARGO_TARGET_DIR/release"
work=$(mktemp -d); spid=""; trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$work"' EXIT
args=(--kind "$kind" --objects "$objects" --events "$events" "${extra[@]}")
"$bin/wire-server" "${args[@]}" --dump-watch "$work/watch.jsonl" 2>/dev/null
"$bin/wire-server" "${args[@]}" >"$work/out" 2>"$work/err" & spid=$!
url=""
for _ in $(seq 100); do url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$work/out"); [ -n "$url" ] && break; sleep 0.1; done
[ -n "$url" ] || { echo "compare.sh: wire-server did not start: $(tail -2 "$work/err")" >&2; exit 1; }
for _ in $(seq "$rounds"); do
  # a peer that fails or times out just leaves no line for that round
  for c in $clients; do case "$c" in
  kube-rs)
    "$bin/kube-rs-peer" --server "$url" --kind "$kind" --events "$events" 2>/dev/null | tail -1 | grep '^{' | tee -a "$work/res" || true;;
  client-go)
    # client-go of the 1.37 line, the shared kit's static binary (protobuf, as its typed clients ask).
    cg="${CLIENT_GO_PEER:-$here/../../../shared/peers/bin/client-go-current-peer}"
    if [ -x "$cg" ]; then
      timeout 300 "$cg" --server "$url" --kind "$kind" --events "$events" 2>/dev/null | tail -1 | grep '^{' \
        | sed 's/"client":"client-go v[^"]*"/"client":"client-go-1.37"/' | tee -a "$work/res" || true
    else
      echo "compare.sh: no client-go peer at $cg (set CLIENT_GO_PEER)" >&2
    fi;;
  informer|informer-json|informer-dyn|informer-k8s)
    mode=typed; [ "$c" = informer-json ] && mode=json; [ "$c" = informer-dyn ] && mode=dynamic; [ "$c" = informer-k8s ] && mode=k8s-openapi
    "$bin/informer-peer" --server "$url" --kind "$kind" --events "$events" --watch-dump "$work/watch.jsonl" --mode "$mode" 2>"$work/ierr" | tail -1 | grep '^{' | tee -a "$work/res" || { echo "informer-peer --mode $mode failed: $(tail -2 "$work/ierr")" >&2; true; }
    tail -1 "$work/ierr" >&2;;
  kwatch)
    # Its --stats line (stderr), in the peers' shape: no lookups.
    timeout 300 "$bin/kwatch" --server "$url" -n default watch "$kind" -o none --max-events "$events" --stats 2>"$work/kerr" >/dev/null || true
    python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(json.dumps({"client":"kwatch","objects":s["objects"],"events":s["watch_events"],"sync_seconds":s["sync_seconds"],"watch_seconds":s["watch_seconds"],"watch_events_per_sec":round(s["events_per_sec"]),"lookup_ns_p50":0,"lookup_ns_p99":0,"peak_rss_kib":s["peak_rss_kib"]}))' "$(grep '^{' "$work/kerr" | tail -1)" | tee -a "$work/res" || echo "kwatch failed: $(tail -2 "$work/kerr")" >&2;;
  esac; done
done
python3 - "$work/res" "$kind" "$objects" "$events" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows: by.setdefault(r["client"], []).append(r)
print(f"\n{sys.argv[2]}: {sys.argv[3]} objects, {sys.argv[4]} events; medians of {len(next(iter(by.values())))} runs")
print(f"{'client':10} {'sync s':>8} {'events/s':>10} {'get p50':>8} {'get p99':>8} {'peak RSS MiB':>13}")
for c, rs in by.items():
    m = lambda k: st.median(r[k] for r in rs)
    print(f"{c:10} {m('sync_seconds'):8.3f} {m('watch_events_per_sec'):10.0f} {m('lookup_ns_p50'):8.1f} {m('lookup_ns_p99'):8.1f} {m('peak_rss_kib')/1024:13.1f}")
keys = ("sync_seconds", "watch_events_per_sec", "lookup_ns_p50", "lookup_ns_p99", "peak_rss_kib")
print("MEDIANS " + json.dumps({c: {k: st.median(r[k] for r in rs) for k in keys} | {"runs": len(rs)} for c, rs in by.items()}))
PY
