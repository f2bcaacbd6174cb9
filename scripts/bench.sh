#!/usr/bin/env bash
# The README's first command: install what is missing, build (Release), and run
# minibench (sessions and calls, every method and transport, with floors). The
# Kerberos rows run against a throwaway realm that minibench starts itself
# (krb5kdc on a free 127.0.0.1 port, in a temporary directory) and stops.
# Extra arguments go to minibench, e.g.: scripts/bench.sh sessions -n 5000
# Rows: build-release/results/minibench.json; their chart: minibench.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_TYPE=Release bash scripts/build.sh build-release -DAUTHRPC_BUILD_TESTS=OFF
mkdir -p build-release/results
exec build-release/minibench/minibench "$@" --json build-release/results/minibench.json \
  --plot build-release/results/minibench.svg
