#!/usr/bin/env python3
"""Checks that Cargo.toml's rust-version equals the highest rust-version among the crates the
library's build compiles (its normal dependencies, default features), from `cargo metadata` on
stdin: `cargo metadata --format-version 1 | python3 .ci/rust_version.py`."""
import json, sys
meta = json.load(sys.stdin)
pkgs = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = meta["resolve"]["root"]
def ver(s):
    return tuple(int(x) for x in (s.split(".") + ["0", "0"])[:3])
# The normal (non-dev, non-build) dependency closure of the library: what a user's build compiles.
seen, todo = set(), [root]
while todo:
    for dep in nodes[todo.pop()]["deps"]:
        if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
            seen.add(dep["pkg"])
            todo.append(dep["pkg"])
need = max((ver(pkgs[i]["rust_version"]), pkgs[i]["name"]) for i in seen if pkgs[i]["rust_version"])
ours = pkgs[root]["rust_version"]
print(f"rust-version {ours}; highest of the dependencies: {'.'.join(map(str, need[0]))} ({need[1]})")
if ver(ours) != need[0]:
    sys.exit("Cargo.toml's rust-version must equal the highest rust-version of the dependencies")
