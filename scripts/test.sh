#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, then
#  1. build and run the whole test suite (ctest),
#  2. build and run it again with AddressSanitizer + UndefinedBehaviorSanitizer,
#  3. build the libFuzzer targets (clang, ASan+UBSan) and run each for
#     AUTHRPC_FUZZ_SECONDS (default 20) on its seed corpus (scripts/fuzz.sh),
#  4. install authrpc into a temporary prefix and build examples/ against it
#     as a separate consumer project (find_package(authrpc)), then run it.
# Set AUTHRPC_SKIP_ASAN=1 to skip step 2 locally, AUTHRPC_SKIP_FUZZ=1 step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)

echo "== build and test (RelWithDebInfo)"
bash scripts/build.sh build
ctest --test-dir build -j "$JOBS" --output-on-failure --timeout 300

if [[ "${AUTHRPC_SKIP_ASAN:-0}" != 1 ]]; then
  echo "== build and test (ASan + UBSan)"
  BUILD_TYPE=Debug bash scripts/build.sh build-asan -DAUTHRPC_SANITIZE=ON -DAUTHRPC_BUILD_MINIBENCH=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
    ctest --test-dir build-asan -j "$JOBS" --output-on-failure --timeout 600
fi

if [[ "${AUTHRPC_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== fuzz (docs/FUZZING.md)"
  bash scripts/fuzz.sh "${AUTHRPC_FUZZ_SECONDS:-20}"
fi

echo "== install and build examples/ as a consumer project"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build --prefix "$prefix" >/dev/null
cmake -S examples -B build/examples-consumer -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/examples-consumer -j "$JOBS"
build/examples-consumer/hello_service

echo "== all tests passed in $(( $(date +%s) - start )) s"
