#!/usr/bin/env bash
# Builds the tests whose threads meet (token stores and their watch threads,
# the server's IO threads and handler pools, the client runtime, shared-memory
# rings, metric cells, JWKS refresh, policy reload, the bad-input and protocol
# tables against a live server) with ThreadSanitizer into build-tsan/, and
# runs each; exits non-zero at the first data race, lock-order inversion or
# failed test.
#   scripts/tsan.sh [TEST...]     (default: the list below)
# Not a step of scripts/test.sh: it is a third build of every library (about
# 15 minutes on 2 cores with a cold ccache). docs/TESTING.md says when to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=("$@")
if ((${#tests[@]} == 0)); then
  tests=(secret_manager_test zk_token_store_test file_token_store_test timed_token_store_test
         server_test server_metrics_test server_connection_test client_call_test streaming_test
         shm_ring_test shm_handoff_test shm_stream_plane_test metrics_test metric_cells_test
         jwt_token_source_test preauth_budget_test tls_test cycle_clock_test authz_test
         server_dispatch_test call_router_test bad_input_test stream_bad_input_test
         protocol_conformance_test jwt_https_test)
fi
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-tsan "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUTHRPC_TSAN=ON \
  -DAUTHRPC_BUILD_MINIBENCH=OFF >/dev/null
cmake --build build-tsan -j "$JOBS" --target "${tests[@]}"
# ThreadSanitizer's runtime cannot follow a fork() taken while other threads
# run (the child dies in it): the test that does so on purpose is left to the
# other builds.
declare -A filter=([metric_cells_test]=-MetricCellsTest.AChildForkedWhileAnotherThreadMakesMetricsCounts)
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
start=$(date +%s)
for t in "${tests[@]}"; do
  echo "== $t"
  build-tsan/tests/"$t" --gtest_brief=1 ${filter[$t]:+"--gtest_filter=${filter[$t]}"}
done
echo "== ThreadSanitizer: ${#tests[@]} test programs passed in $(( $(date +%s) - start )) s"
