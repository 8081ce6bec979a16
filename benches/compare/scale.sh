#!/usr/bin/env bash
# Many informers on one client, side by side: this repository's library (informer-scale: N
# `Informer<ConfigMap>`, H counting handlers each) and kube-rs 5.0 (kube-rs-scale: N
# `reflector(watcher(...))` tasks), each run against a fresh `kwatch sim` built from this checkout,
# seeded over plain HTTP with N namespaces x 10 ConfigMaps; then one new ConfigMap per namespace.
# ROUNDS rounds, the runs of a round interleaved. Prints each run's JSON line, a median table and a
# last line `MEDIANS {"informer N hH": {...}, "kube-rs N": {...}}`.
#   ./scale.sh [--n "100 300 1000"] [--handlers "1 3"] [--handlers-at "300"] [--rounds R]
#              [--backlog B] [--kwatch PATH]
# H = 1 runs at every N; the other --handlers counts only at the N listed in --handlers-at.
# --backlog B runs the simulator with listen() backlog B (LD_PRELOAD shim, needs cc), as a Go
# apiserver's listener gets from the kernel; without it the simulator listens as it chooses.
# --kwatch PATH uses that simulator binary instead of building the checkout's.
# The first run builds kwatch at the repository root and this workspace (kube-rs and k8s-openapi take
# a few minutes on 2 cores). CARGO_TARGET_DIR, if set, is used for both builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ns="100 300 1000" hs="1 3" hs_at="300" rounds=3 backlog="" kwatch=""
while [ $# -gt 0 ]; do case "$1" in
  --n) ns=$2; shift 2;; --handlers) hs=$2; shift 2;; --handlers-at) hs_at=$2; shift 2;;
  --rounds) rounds=$2; shift 2;; --backlog) backlog=$2; shift 2;; --kwatch) kwatch=$2; shift 2;;
  *) echo "scale.sh: unknown $1" >&2; exit 2;; esac; done
user_target="${CARGO_TARGET_DIR:-}"
[ -z "$user_target" ] || { mkdir -p "$user_target"; user_target="$(cd "$user_target" && pwd)"; }

# The simulator, from this checkout. Plain `cargo build --release` at the root builds kwatch while the
# root package carries it; once the repository is a workspace with a `kwatch` package, that package
# is named explicitly, so a stale binary is never picked up.
if [ -z "$kwatch" ]; then
  pkg=()
  if (cd "$root" && cargo metadata --no-deps --format-version 1 2>/dev/null) |
      python3 -c 'import json,sys; sys.exit(0 if any(p["name"] == "kwatch" for p in json.load(sys.stdin)["packages"]) else 1)'; then
    pkg=(-p kwatch)
  fi
  (cd "$root" && cargo build --release -q -j 2 "${pkg[@]}") >&2
  kwatch="${user_target:-$root/target}/release/kwatch"
fi
[ -x "$kwatch" ] || { echo "scale.sh: no simulator at $kwatch" >&2; exit 2; }

export CARGO_TARGET_DIR="${user_target:-$here/target}"
(cd "$here" && cargo build --release -q -j 2 -p scale-probe -p informer-scale -p kube-rs-scale) >&2
bin="$CARGO_TARGET_DIR/release"

work=$(mktemp -d); spid=""
trap '[ -z "$spid" ] || stop_sim; rm -rf "$work"' EXIT
pre=()
if [ -n "$backlog" ]; then
  cc -O2 -shared -fPIC -o "$work/backlog.so" "$here/scale-probe/backlog.c" -ldl
  pre=(env LD_PRELOAD="$work/backlog.so" BACKLOG="$backlog")
fi
touch "$work/res"

stop_sim() { # Ctrl-C, on which the simulator removes the kubeconfig it wrote (SIGTERM would not)
  kill -INT $spid 2>/dev/null || echo "scale.sh: the simulator had already exited: $(tail -2 "$work/sim.log")" >&2
  for _ in $(seq 50); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
  kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true; spid=""
  local kc; kc=$(sed -n 's/^kubeconfig \(.*\)/\1/p' "$work/sim.log")
  [ -z "$kc" ] || rm -f "$kc"
}
run1() { # CLIENT N H: a fresh simulator, seeded, then one client run; its JSON line goes to res
  # Emptied here, not by the background job's redirection: that may run after the first look
  # below, which would then read the previous simulator's URL.
  : >"$work/sim.log"
  "${pre[@]}" "$kwatch" sim >>"$work/sim.log" 2>&1 & spid=$!
  local url=""
  for _ in $(seq 100); do url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$work/sim.log"); [ -n "$url" ] && break; sleep 0.1; done
  [ -n "$url" ] || { echo "scale.sh: the simulator did not start: $(tail -2 "$work/sim.log")" >&2; exit 1; }
  if ! "$bin/scale-seed" --server "$url" --n "$2" 2>"$work/err"; then
    echo "scale.sh: seeding for $1 n=$2 h=$3 failed, run skipped: $(tail -2 "$work/err")" >&2
    stop_sim; return
  fi
  sleep 1 # let the seeding's connection close and the machine settle
  local cmd=("$bin/kube-rs-scale" --server "$url" --n "$2")
  [ "$1" = informer ] && cmd=("$bin/informer-scale" --server "$url" --n "$2" --handlers "$3")
  # a client that fails or times out just leaves no line for that run
  if timeout 300 "${cmd[@]}" 2>"$work/err" | tail -1 | grep '^{' >"$work/line"; then
    cat "$work/line" | tee -a "$work/res"
  else
    echo "scale.sh: $1 n=$2 h=$3 failed: $(tail -2 "$work/err")" >&2
  fi
  stop_sim
}
for _ in $(seq "$rounds"); do
  for n in $ns; do
    for h in $hs; do
      [ "$h" = 1 ] || [[ " $hs_at " == *" $n "* ]] || continue
      run1 informer "$n" "$h"
    done
    run1 kube-rs "$n" 1
  done
done

python3 - "$work/res" "$rounds" "${backlog:-as the simulator chooses}" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    name = f"{r['client']} {r['n']}" + (f" h{r['handlers']}" if r["client"] == "informer" else "")
    by.setdefault(name, []).append(r)
figures = {
    "sync_s": lambda r: r["sync_s"],
    "lag_ms": lambda r: r["lag_ms"],
    "median_lag_ms": lambda r: r["median_lag_ms"],
    "worst_lag_ms": lambda r: r["worst_lag_ms"],
    "threads": lambda r: r["end"]["threads"],
    "cpu_s": lambda r: r["end"]["cpu_s"],
    "peak_rss_mib": lambda r: r["end"]["vmhwm_kib"] / 1024,
    "kib_per_informer": lambda r: (r["end"]["vmhwm_kib"] - r["base"]["vmhwm_kib"]) / r["n"],
    "sockets": lambda r: r["end"]["tcp_established"],
    "listen_drops": lambda r: r["end"]["listen_drops"] - r["base"]["listen_drops"],
}
med = {}
for name, rs in by.items():
    med[name] = {k: st.median(f(r) for r in rs) for k, f in figures.items()} | {"runs": len(rs)}
    med[name]["sync_s_range"] = [min(r["sync_s"] for r in rs), max(r["sync_s"] for r in rs)]
order = sorted(by, key=lambda k: (by[k][0]["n"], by[k][0]["client"] != "informer", by[k][0]["handlers"]))
print(f"\nmedians of up to {sys.argv[2]} runs; listen backlog: {sys.argv[3]}")
print("| N | client | runs | sync s | lag ms | median lag ms | worst lag ms | OS threads | CPU s | peak RSS MiB | KiB per informer | sockets | listen drops |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for name in order:
    d, r0 = med[name], by[name][0]
    client = r0["client"] + (f", {r0['handlers']} handlers each" if r0["client"] == "informer" and r0["handlers"] > 1 else "")
    lo, hi = d["sync_s_range"]
    sync = f"{d['sync_s']:.3f}" + (f" ({lo:.3f}–{hi:.3f})" if d["runs"] > 1 else "")
    print(f"| {r0['n']} | {client} | {d['runs']} | {sync} | {d['lag_ms']:.1f} | {d['median_lag_ms']:.2f} | {d['worst_lag_ms']:.1f} | {d['threads']:.0f} | {d['cpu_s']:.2f} | {d['peak_rss_mib']:.1f} | {d['kib_per_informer']:.0f} | {d['sockets']:.0f} | {d['listen_drops']:.0f} |")
print("MEDIANS " + json.dumps(med))
PY
