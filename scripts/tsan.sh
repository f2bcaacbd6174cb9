#!/usr/bin/env bash
# Builds the test programs whose threads meet (token stores and their watch
# threads, the server's IO threads and handler pools, the client runtime,
# shared-memory rings, metric cells, JWKS refresh, policy reload, the
# bad-input and protocol tables against a live server) with ThreadSanitizer
# into build-tsan/, and runs their cases through ctest; exits non-zero if a
# case finds a data race or a lock-order inversion, or fails.
#   scripts/tsan.sh [CTEST_REGEX]
#       (default: every case of the base, security, rpc, server, client and
#        jwt programs, and the ZooKeeper token store's)
# Not a step of scripts/test.sh: it is a third build of every library (about
# 15 minutes on 2 cores with a cold ccache). docs/TESTING.md says when to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
select=${1:-'^(base|security|rpc|server|client|jwt)\.|^zookeeper\.token_store$'}
# Left out: the CLI's cases (they run the programs, not threads of this
# one); the IdP's, which wait on glewlwyd; and the case that forks while
# another thread runs, which ThreadSanitizer's runtime cannot follow into the
# child.
exclude='^client\.CliTest\.|glewlwyd|AChildForkedWhileAnotherThreadMakesMetricsCounts'
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
programs=(base_tests security_tests rpc_tests server_tests client_tests jwt_tests)
if [[ -z ${1:-} ]] && dpkg-query -W -f='${Status}' libzookeeper-mt-dev 2>/dev/null | grep -q 'ok installed'; then
  programs+=(zookeeper_tests)
fi
bash scripts/build.sh --configure-only build-tsan -DAUTHRPC_TSAN=ON -DAUTHRPC_BUILD_MINIBENCH=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DAUTHRPC_UNITY_TESTS=ON -DAUTHRPC_TEST_COMPILE_OPTIONS=-O0
cmake --build build-tsan -j "$JOBS" --target "${programs[@]}" authrpc authrpc-server
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
start=$(date +%s)
ctest --test-dir build-tsan -R "$select" -E "$exclude" -j "$((JOBS * 2))" --output-on-failure --timeout 300
echo "== ThreadSanitizer: no race in $(( $(date +%s) - start )) s"
