#!/usr/bin/env python3
"""Draw the side-by-side medians as an SVG bar chart (stdlib only).

Usage: chart.py OUT.svg RUN.txt [RUN.txt ...] [--note TEXT]

Each RUN.txt is what `compare.sh` (this folder's, or the shared kit's, which print the same
lines) wrote: its `MEDIANS {client: {figure: median}}` line and, before it, the line naming the
stream (`pods: 20000 objects, 50000 events; medians of 3 runs`). One row of panels per run:
sync time, events per second and peak RSS, one bar per client, each labelled with its figure
and its ratio to kube-rs where kube-rs ran. Shorter is better for time and memory, longer for
events per second; the panel titles say which.
"""

import json
import sys
from html import escape

PANELS = (
    ("sync_seconds", "sync s (lower is better)", lambda v: f"{v:.3f}"),
    ("watch_events_per_sec", "events/s (higher is better)", lambda v: f"{v:,.0f}"),
    ("peak_rss_kib", "peak RSS MiB (lower is better)", lambda v: f"{v / 1024:.1f}"),
)
NAMES = {
    "kube-rs": "kube-rs 5.0",
    "client-go-current": "client-go 1.37",
    "client-go-1.37": "client-go 1.37 (protobuf)",
    "client-go": "client-go",
    "informer": "informer",
    "informer-k8s": "informer (k8s-openapi)",
    "informer-dynamic": "informer (JsonObject)",
    "kwatch": "kwatch",
}
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")


def read_run(path):
    title, medians = None, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("MEDIANS "):
                medians = json.loads(line[len("MEDIANS "):])
            elif "objects," in line and "events" in line and "medians of" in line:
                title = line.strip()
    if medians is None:
        sys.exit(f"{path}: no MEDIANS line (is it compare.sh's output?)")
    return title or path, medians


def main(argv):
    note = None
    if "--note" in argv:
        i = argv.index("--note")
        note = argv[i + 1]
        del argv[i : i + 2]
    if len(argv) < 3:
        sys.exit(__doc__)
    out, runs = argv[1], [read_run(p) for p in argv[2:]]
    clients = []
    for _, medians in runs:
        clients += [c for c in medians if c not in clients]
    colour = {c: COLOURS[i % len(COLOURS)] for i, c in enumerate(clients)}

    label_w, panel_w, bar_h, gap = 185, 250, 16, 4
    width = label_w + len(PANELS) * (panel_w + 20) + 10
    y, body = 30, []
    for title, medians in runs:
        body.append(f'<text x="10" y="{y}" class="run">{escape(title)}</text>')
        y += 22
        for p, (key, heading, fmt) in enumerate(PANELS):
            x0 = label_w + p * (panel_w + 20)
            body.append(f'<text x="{x0}" y="{y}" class="head">{escape(heading)}</text>')
        y += 8
        for c, m in medians.items():
            body.append(
                f'<text x="{label_w - 8}" y="{y + bar_h - 4}" class="client">'
                f"{escape(NAMES.get(c, c))}</text>"
            )
            for p, (key, _, fmt) in enumerate(PANELS):
                x0 = label_w + p * (panel_w + 20)
                top = max(mm[key] for mm in medians.values()) or 1
                w = max(1.0, (panel_w - 90) * m[key] / top)
                ratio = ""
                if "kube-rs" in medians and c != "kube-rs" and medians["kube-rs"][key]:
                    ratio = f" ({m[key] / medians['kube-rs'][key]:.2f}x)"
                body.append(
                    f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                    f'fill="{colour[c]}"/>'
                )
                body.append(
                    f'<text x="{x0 + w + 4:.1f}" y="{y + bar_h - 4}" class="fig">'
                    f"{fmt(m[key])}{ratio}</text>"
                )
            y += bar_h + gap
        y += 24
    if note:
        body.append(f'<text x="10" y="{y}" class="note">{escape(note)}</text>')
        y += 16
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'viewBox="0 0 {width} {y}" font-family="sans-serif">\n'
        "<style>.run{font-size:14px;font-weight:bold}.head{font-size:12px;fill:#333}"
        ".client{font-size:12px;text-anchor:end}.fig{font-size:11px;fill:#222}"
        ".note{font-size:11px;fill:#555}</style>\n"
        f'<rect width="{width}" height="{y}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
    with open(out, "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main(sys.argv)
