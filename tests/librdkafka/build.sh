#!/usr/bin/env bash
# Builds librdkafka's own C test runner for tests/e2e/test_librdkafka_suite.py into
# .cache/rdkafka-tests (ignored), for scripts/test. librdkafka's tests/ ship in the
# npm package of Confluent's JavaScript client (deps/librdkafka), pinned below to the
# release whose librdkafka is closest to the one in the Python client's wheel
# (confluent-kafka 2.16.1 carries librdkafka 2.16.0; kafka-javascript 1.10.1 vendors
# 2.15.1, the newest on npm). npm installs it without running its install scripts,
# which would fetch a prebuilt Node addon from outside the registry; we need only
# the C sources.
#
# librdkafka is configured with no optional dependency (TLS, SASL/GSSAPI, zstd,
# zlib, curl): the selected tests use none of them, and no system package is needed
# beyond a C compiler and make. Only the static library and a runner holding the
# selected tests are compiled (tests/librdkafka/runner.mk), with make -j2, so a
# second run compiles nothing. Prints nothing unless it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

package="@confluentinc/kafka-javascript"
version="1.10.1"
cache=.cache/rdkafka-tests
src="$cache/node_modules/$package/deps/librdkafka"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
    cat "$log" >&2
    echo "tests/librdkafka/build.sh: $1 failed" >&2
    exit 1
}

# The installed package's version, or nothing; a different pin installs afresh
# (and the old build goes with it).
installed=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$cache/node_modules/$package/package.json" 2>/dev/null || true)
if [ "$installed" != "$version" ]; then
    rm -rf "$cache"
    mkdir -p "$cache"
    npm install --prefix "$cache" --no-save --ignore-scripts --no-audit --no-fund \
        --omit=dev --omit=optional "$package@$version" >"$log" 2>&1 || fail "npm install $package@$version"
fi

if [ ! -f "$src/Makefile.config" ]; then
    (cd "$src" && ./configure --no-download --disable-ssl --disable-gssapi --disable-zstd \
        --disable-zlib --disable-curl --disable-lz4-ext --disable-regex-ext \
        --disable-syslog) >"$log" 2>&1 || fail "configuring librdkafka"
fi
make -C "$src/src" -j2 librdkafka.a >"$log" 2>&1 || fail "building librdkafka"
make -f "$PWD/tests/librdkafka/runner.mk" -j2 SRC="$PWD/$src" OUT="$PWD/$cache/build" \
    >"$log" 2>&1 || fail "building librdkafka's test runner"
