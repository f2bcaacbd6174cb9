#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, then
#  1. build and run the whole test suite (ctest),
#  2. build and run it again with AddressSanitizer + UndefinedBehaviorSanitizer,
#  3. build the libFuzzer targets (clang, ASan+UBSan) and run each for
#     AUTHRPC_FUZZ_SECONDS (default 20) on its seed corpus (scripts/fuzz.sh),
#  4. install authrpc into a temporary prefix, check that docker/'s runtime
#     image installs every library the installed binaries load, build
#     examples/ against the prefix as a separate consumer project
#     (find_package(authrpc)) and run its programs (hello_service, and
#     psk_service with its own mechanism); build them again with pkg-config
#     alone from the installed copy, check that they link no
#     Kerberos/SASL/ZooKeeper library and that every installed header
#     compiles on its own,
#  5. run the README's and docs' shell blocks marked <!-- ci: run -->,
#  6. check that no built-in mechanism's name decides anything outside its
#     module (scripts/check_mechanism_names.sh).
# Set AUTHRPC_SKIP_ASAN=1 to skip step 2 locally, AUTHRPC_SKIP_FUZZ=1 step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)

echo "== build and test (RelWithDebInfo)"
bash scripts/build.sh build
bash scripts/check_layers.sh build  # includes and library links follow the layers
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
# The Docker image must install every library these binaries load.
bash scripts/check_image_deps.sh "$prefix/bin"
cmake -S examples -B build/examples-consumer -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/examples-consumer -j "$JOBS"
build/examples-consumer/hello_service
build/examples-consumer/psk_service

echo "== the installed package without CMake: pkg-config, examples, scripts"
pc=$(find "$prefix" -name authrpc.pc -print -quit)
[[ -n $pc ]] || { echo "test: no authrpc.pc installed" >&2; exit 1; }
share=$prefix/share/authrpc
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
g++ -o build/hello_service-pkgconfig "$share/examples/hello_service.cc" \
  $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs authrpc)
build/hello_service-pkgconfig
# The custom-mechanism example computes its proofs with OpenSSL itself.
# shellcheck disable=SC2046
g++ -o build/psk_service-pkgconfig "$share/examples/psk_service.cc" "$share/examples/psk_mechanism.cc" \
  $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs authrpc openssl)
build/psk_service-pkgconfig
# A program with its own mechanisms links no Kerberos, SASL or ZooKeeper
# library (docs/API.md), whichever way it was built.
for bin in build/examples-consumer/hello_service build/hello_service-pkgconfig \
           build/examples-consumer/psk_service build/psk_service-pkgconfig; do
  if ldd "$bin" | grep -E 'lib(gssapi_krb5|krb5|sasl2|zookeeper)'; then
    echo "test: $bin links a library of an optional component" >&2; exit 1
  fi
done
# Every installed header compiles on its own against the prefix (a header
# missing from CMakeLists.txt's lists fails here).
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags authrpc-builtins)
(cd "$prefix/include" && find authrpc -name '*.h' | sort) |
  xargs -P "$JOBS" -I{} sh -c 'echo "#include <{}>" | g++ -x c++ -fsyntax-only $0 - ||
                                  { echo "test: installed header {} does not compile on its own" >&2; exit 255; }' "$flags"
for f in examples/server.json examples/server-tls.json examples/acl.json; do
  cmp "$f" "$share/$f"
done
"$share/scripts/kdc" --help >/dev/null

echo "== the README's and docs' runnable examples (scripts/check_docs.sh)"
bash scripts/check_docs.sh build

echo "== no mechanism name decides anything outside its module (scripts/check_mechanism_names.sh)"
bash scripts/check_mechanism_names.sh

echo "== all tests passed in $(( $(date +%s) - start )) s"
