#!/usr/bin/env python3
"""Checks that each workspace member's rust-version (the library, informer-sim, kwatch) equals the
highest rust-version among the crates its build compiles (its normal dependencies, the other
members included), from `cargo metadata` on stdin:
`cargo metadata --format-version 1 | python3 .ci/rust_version.py`."""
import json, sys
meta = json.load(sys.stdin)
pkgs = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
def ver(s):
    return tuple(int(x) for x in (s.split(".") + ["0", "0"])[:3])
failed = []
for member in meta["workspace_members"]:
    # The normal (non-dev, non-build) dependency closure: what a user's build of it compiles.
    seen, todo = set(), [member]
    while todo:
        for dep in nodes[todo.pop()]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    need = max((ver(pkgs[i]["rust_version"]), pkgs[i]["name"]) for i in seen if pkgs[i]["rust_version"])
    name, ours = pkgs[member]["name"], pkgs[member]["rust_version"]
    print(f"{name}: rust-version {ours}; highest of its dependencies: {'.'.join(map(str, need[0]))} ({need[1]})")
    if ours is None or ver(ours) != need[0]:
        failed.append(name)
if failed:
    sys.exit(f"rust-version must equal the highest rust-version of the dependencies in: {', '.join(failed)}")
