#!/usr/bin/env bash
# Builds Toxiproxy's server (Shopify's TCP proxy that injects latency, resets, timeouts
# and bandwidth limits on command, over an HTTP API) for the network-fault tests
# (tests/faults/), into .cache/toxiproxy/bin/toxiproxy-server (ignored), for
# scripts/test. No Debian package serves it, so it is compiled with Go from the Go
# module proxy at the version pinned below; the module and build caches stay under
# .cache/toxiproxy too, so a second run compiles nothing and downloads nothing.
# Prints nothing unless it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

module="github.com/Shopify/toxiproxy/v2"
version="v2.5.0"
cache="$PWD/.cache/toxiproxy"
binary="$cache/bin/toxiproxy-server"
stamp="$cache/bin/version"

if [ -x "$binary" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    exit 0
fi

go=$(command -v go || true)
[ -n "$go" ] || go=/usr/local/go/bin/go
[ -x "$go" ] || { echo "tests/toxiproxy/build.sh: no Go toolchain (apt-get install golang-go)" >&2; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf "$cache/bin"
mkdir -p "$cache/bin"
# GOTOOLCHAIN=local: build with the Go installed here, never fetch another toolchain.
# -modcacherw: the module cache stays deletable (rm -rf .cache).
if ! GOBIN="$cache/gobin" GOMODCACHE="$cache/mod" GOCACHE="$cache/gocache" \
    GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" \
    "$go" install "$module/cmd/server@$version" >"$log" 2>&1; then
    cat "$log" >&2
    echo "tests/toxiproxy/build.sh: go install $module/cmd/server@$version failed" >&2
    exit 1
fi
mv "$cache/gobin/server" "$binary"
echo "$version" >"$stamp"
