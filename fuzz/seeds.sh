#!/usr/bin/env bash
# Builds the seed corpora of the fuzz targets from fixtures/ into DIR/<target>/ (default
# fuzz/seeds). Only bash and coreutils: CI runs it before the smoke runs.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-fuzz/seeds}"
rm -rf "$out"
mkdir -p "$out"/{frames,watch_event,list_body,kubeconfig,json_object,protobuf}
# Named by content, so duplicates collapse and pipelines (subshells) need no shared counter.
seed() {
    local tmp
    tmp="$(mktemp)"
    cat > "$tmp"
    mv "$tmp" "$out/$1/$(sha1sum < "$tmp" | cut -c1-16)"
}

# HTTP captures: the body after the blank line (chunked bodies keep their chunk sizes: frames
# scanners see them as junk between values, which is a case worth keeping).
body() { sed '1,/^\r$/d' "$1"; }

for f in fixtures/wire/*.http; do
    body "$f" | seed frames
    case "$f" in
        *list*) body "$f" | seed list_body ;;
        *watch*) body "$f" | { grep '^{' || true; } | while IFS= read -r line; do printf '%s\n' "$line" | seed watch_event; done ;;
        *) body "$f" | seed list_body ;;
    esac
done
for f in fixtures/wire/*.jsonl; do
    seed frames < "$f"
    while IFS= read -r line; do printf '%s' "$line" | seed watch_event; done < "$f"
done
# What the json_object target once found: kept as seeds, so a smoke run starts from them.
for f in fixtures/json_object/*.json; do
    seed json_object < "$f"
done
for f in fixtures/wire/*.json fixtures/*.json; do
    seed frames < "$f"
    seed json_object < "$f"
    # One object as the item of a list, and as the object of each event type.
    { printf '{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":['; cat "$f"; printf ']}'; } | seed list_body
    for type in ADDED MODIFIED DELETED; do
        { printf '{"type":"%s","object":' "$type"; cat "$f"; printf '}'; } | seed watch_event
    done
done
printf '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}' | seed watch_event
printf '{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}' | seed watch_event

# Protobuf: the real watch stream (de-chunked) pushed whole and in pieces of 1, 7 and 64 bytes
# (the first byte), and one Endpoints' message.
for piece in '\x00' '\x01' '\x07' '\x40'; do
    { printf "$piece"; cat fixtures/real-1.20-watch-endpoints-protobuf.stream; } | seed protobuf
done
{ printf '\x00'; cat fixtures/real-1.20-endpoints-pb-1.pb; } | seed protobuf

# Kubeconfigs: the shapes the tests use (tokens, exec plugins, certificates, merged files).
cat <<'YAML' | seed kubeconfig
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://k:6443', certificate-authority-data: 'LS0tLQ==', proxy-url: 'http://u:p@proxy:3128'}
users:
- name: u
  user: {token: t, client-certificate-data: 'LS0tLQ==', client-key-data: 'LS0tLQ=='}
- name: e
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: plugin, args: [a, b], env: [{name: K, value: v}], interactiveMode: Never, provideClusterInfo: true}
contexts:
- {name: x, context: {cluster: c, user: u, namespace: apps}}
current-context: x
YAML
printf 'clusters: [{name: c, cluster: null}]\nusers: ~\ncontexts: []\n' | seed kubeconfig
printf 'users: [{name: u, user: {auth-provider: {name: gcp, config: {access-token: x}}, tokenFile: /t}}]\n' | seed kubeconfig
echo "seeds: $(find "$out" -type f | wc -l) files in $out"
