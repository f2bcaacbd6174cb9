#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, then, in
# stages whose wall times it prints as a table at the end (docs/TESTING.md):
#   setup        scripts/setup.sh
#   configure    build/: g++, RelWithDebInfo with -g1, each library file on
#                its own (so a missing #include shows), test programs -g0 as
#                unity sources of 4 files, ccache, Ninja and mold or lld when
#                installed
#   build        everything in build/, minibench included
#   ctest        the whole suite on build/
#   asan build   build-asan/: clang, ASan + UBSan, libraries -O1 with
#                libFuzzer's coverage, test programs -O0, both as unity
#                sources (8 and 5 files)
#   asan ctest   the whole suite again on build-asan/, up to eight cases of
#                one suite per process (a sanitizer's start costs more than
#                most cases)
#   fuzz build   the libFuzzer targets in build-asan/, on its libraries
#   fuzz run     each target for AUTHRPC_FUZZ_SECONDS (default 20) on its
#                seed corpus, one per core at a time (scripts/fuzz.sh)
#   consumers    authrpc installed into a prefix (build/consumer-prefix):
#                the docker runtime image's packages
#                (scripts/check_image_deps.sh), examples/ built against it
#                with CMake and with pkg-config alone (the untyped examples
#                linking no Kerberos/SASL/ZooKeeper/curl/protobuf library
#                nor holding the jwt component's code; the typed kv server
#                and client of each build run as a pair, with Kerberos from
#                a throwaway realm of scripts/kdc), and every installed
#                header compiled on its own
#   docs         the READMEs' and docs' shell blocks marked <!-- ci: run -->
#   checks       includes and links follow the layers; no built-in
#                mechanism's name decides anything outside its module; no
#                function over its length limit
# AUTHRPC_SKIP_ASAN=1 skips the two asan stages (and the fuzz stages, which
# build in that tree), AUTHRPC_SKIP_FUZZ=1 the fuzz stages: for a quicker
# local loop only; CI runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
# Most test cases wait on sockets, timers and child processes rather than
# compute: more of them at once than cores keeps the cores busy.
CTEST_JOBS=${CTEST_JOBS:-$((JOBS * 4))}

stage_names=() stage_seconds=() current_stage=""
run_start=$SECONDS
# At exit: prints the stages run so far with the total, so a failed run's
# log says where its time went too.
on_exit() {
  local status=$? i
  echo
  echo "== stage times (s)"
  for i in "${!stage_names[@]}"; do
    printf '  %-12s %6d\n' "${stage_names[$i]}" "${stage_seconds[$i]}"
  done
  [[ -n $current_stage ]] && printf '  %-12s %6s  after %d s\n' "$current_stage" FAILED "$((SECONDS - stage_start))"
  printf '  %-12s %6d\n' total "$((SECONDS - run_start))"
  ((status == 0)) && echo "== all tests passed in $((SECONDS - run_start)) s"
  return "$status"
}
trap on_exit EXIT
# stage NAME COMMAND...: runs COMMAND as the stage NAME and records its time.
stage() {
  current_stage=$1
  shift
  echo "== $current_stage"
  stage_start=$SECONDS
  "$@"
  stage_names+=("$current_stage")
  stage_seconds+=($((SECONDS - stage_start)))
  current_stage=""
}

stage setup bash scripts/setup.sh

stage configure bash scripts/build.sh --configure-only build -DAUTHRPC_UNITY_TESTS=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DAUTHRPC_TEST_COMPILE_OPTIONS=-g0
stage build cmake --build build -j "$JOBS"
stage ctest ctest --test-dir build -j "$CTEST_JOBS" --output-on-failure --timeout 300

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
if [[ ${AUTHRPC_SKIP_ASAN:-0} != 1 ]]; then
  asan_build() {
    CC=clang CXX=clang++ BUILD_TYPE=Debug bash scripts/build.sh --configure-only build-asan \
      -DAUTHRPC_FUZZ=ON -DAUTHRPC_BUILD_MINIBENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
      -DAUTHRPC_UNITY_LIBRARIES=ON \
      -DAUTHRPC_TEST_COMPILE_OPTIONS=-O0 -DAUTHRPC_UNITY_TESTS=ON -DAUTHRPC_UNITY_BATCH_SIZE=5 \
      -DAUTHRPC_TEST_GROUP_SIZE=8
    cmake --build build-asan -j "$JOBS"
  }
  stage "asan build" asan_build
  stage "asan ctest" ctest --test-dir build-asan -j "$CTEST_JOBS" --output-on-failure --timeout 600
  if [[ ${AUTHRPC_SKIP_FUZZ:-0} != 1 ]]; then
    export AUTHRPC_FUZZ_BUILD_DIR=build-asan
    stage "fuzz build" bash scripts/fuzz.sh --build-only
    stage "fuzz run" bash scripts/fuzz.sh --run-only "${AUTHRPC_FUZZ_SECONDS:-20}"
  fi
fi

# The installed package as its users get it. The prefix and the consumer
# builds live in build/ and are brought up to date like the build itself (an
# unchanged file keeps its time stamp when installed again; ccache compiles),
# so a run after a small change pays only for what the change touched.
consumers() {
  local prefix=$PWD/build/consumer-prefix cxx=g++ launcher=() stamp=build/consumer-headers.stamp
  if command -v ccache >/dev/null; then
    cxx="ccache g++" launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake --install build --prefix "$prefix" >/dev/null
  # Only what this install put there: a file it no longer installs goes.
  comm -23 <(find "$prefix" -type f -o -type l | sort) <(sort -u build/install_manifest.txt) | xargs -r rm -f
  # The Docker image must install every library these binaries load.
  bash scripts/check_image_deps.sh "$prefix/bin"
  local pc share
  pc=$(find "$prefix" -name authrpc.pc -print -quit)
  [[ -n $pc ]] || { echo "test: no authrpc.pc installed" >&2; return 1; }
  share=$prefix/share/authrpc
  pkg() { PKG_CONFIG_PATH=$(dirname "$pc") pkg-config "$@"; }
  echo "-- examples/ as a consumer project (find_package(authrpc)), and the installed package without CMake (pkg-config)"
  # The two builds at once; the pkg-config one compiles and links in two
  # steps so that ccache can keep its objects.
  # (A consumer tree configured against another prefix starts afresh.)
  grep -qsx "CMAKE_PREFIX_PATH:UNINITIALIZED=$prefix" build/examples-consumer/CMakeCache.txt ||
    rm -rf build/examples-consumer
  cmake -S examples -B build/examples-consumer -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >/dev/null
  cmake --build build/examples-consumer -j "$JOBS" &
  local cmake_build=$!
  # shellcheck disable=SC2046  # pkg-config's flags are meant to be split
  {
    mkdir -p build/consumer-pkgconfig
    $cxx -c -o build/consumer-pkgconfig/hello_service.o "$share/examples/hello_service.cc" $(pkg --cflags authrpc) &&
    g++ -o build/hello_service-pkgconfig build/consumer-pkgconfig/hello_service.o $(pkg --libs authrpc) &&
    # The custom-mechanism example computes its proofs with OpenSSL itself.
    $cxx -c -o build/consumer-pkgconfig/psk_service.o "$share/examples/psk_service.cc" $(pkg --cflags authrpc openssl) &&
    $cxx -c -o build/consumer-pkgconfig/psk_mechanism.o "$share/examples/psk_mechanism.cc" $(pkg --cflags authrpc openssl) &&
    g++ -o build/psk_service-pkgconfig build/consumer-pkgconfig/psk_service.o build/consumer-pkgconfig/psk_mechanism.o \
      $(pkg --libs authrpc openssl) &&
    kv_pkgconfig
  } || { wait "$cmake_build"; return 1; }
  wait "$cmake_build"
  local bin jwt
  for bin in build/examples-consumer/hello_service build/hello_service-pkgconfig \
             build/examples-consumer/psk_service build/psk_service-pkgconfig; do
    "$bin"
    # A program with its own mechanisms links no Kerberos, SASL, ZooKeeper,
    # curl or protobuf library (docs/API.md), whichever way it was built,
    # and none of the jwt component's code (authrpc::jwt, authrpc-jwt) is in
    # it.
    if ldd "$bin" | grep -E 'lib(gssapi_krb5|krb5|sasl2|zookeeper|curl|protobuf)'; then
      echo "test: $bin links a library of an optional component" >&2
      return 1
    fi
    jwt=$(nm -C "$bin" | grep -E 'authrpc::.*([Jj]w[kt]|[Oo][Aa]uth[Bb]earer|https_get|HttpsGet)' || true)
    if [[ -n $jwt ]]; then
      head -3 <<<"$jwt"
      echo "test: $bin holds code of the jwt component" >&2
      return 1
    fi
  done
  kv_pairs build/examples-consumer/kv_server build/examples-consumer/kv_client \
           build/kv_server-pkgconfig build/kv_client-pkgconfig
  # Every installed header compiles on its own against the prefix (a header
  # missing from CMakeLists.txt's lists fails here). The result depends on
  # the headers, the flags, the compiler and the system's packages alone: a
  # run where none of them changed says so instead of compiling them again.
  local flags headers key
  flags=$(pkg --cflags authrpc-builtins authrpc-protobuf)
  headers=$(cd "$prefix/include" && find authrpc -name '*.h' | sort)
  # shellcheck disable=SC2086  # one header a word
  key=$( (cd "$prefix/include" && sha256sum $headers; echo "$flags"; g++ --version; stat -c %Y /var/lib/dpkg/status) |
        sha256sum)
  if [[ $(cat "$stamp" 2>/dev/null) == "$key" ]]; then
    echo "-- the $(wc -l <<<"$headers") installed headers: unchanged since each compiled on its own ($stamp)"
  else
    rm -f "$stamp"
    echo "-- each of the $(wc -l <<<"$headers") installed headers compiled on its own"
    (cd "$prefix/include" && echo "$headers") |
      xargs -P "$JOBS" -I{} sh -c 'echo "#include <{}>" | g++ -x c++ -fsyntax-only $0 - ||
                                      { echo "test: installed header {} does not compile on its own" >&2; exit 255; }' "$flags"
    echo "$key" >"$stamp"
  fi
  local f
  for f in examples/server.json examples/server-tls.json examples/acl.json; do
    cmp "$f" "$share/$f"
  done
  "$share/scripts/kdc" --help >/dev/null
}
# The typed example (examples/kv.proto) without CMake: protoc with the
# installed plugin, then g++ with authrpc-protobuf's and authrpc-kerberos's
# flags. Uses consumers()'s pkg, share, prefix and cxx.
kv_pkgconfig() {
  local out=build/consumer-pkgconfig gen=build/consumer-pkgconfig/kv f
  mkdir -p "$gen" &&
    protoc --plugin=protoc-gen-authrpc="$(pkg --variable=plugin authrpc-protobuf)" \
      --cpp_out="$gen" --authrpc_out="$gen" -I"$share/examples" -I"$prefix/include" "$share/examples/kv.proto" ||
    return 1
  # shellcheck disable=SC2046  # pkg-config's flags are meant to be split
  for f in "$gen/kv.pb" "$gen/kv.authrpc" "$share/examples/kv_server" "$share/examples/kv_client"; do
    $cxx -c -o "$out/$(basename "$f").o" "$f.cc" -I"$gen" $(pkg --cflags authrpc-protobuf authrpc-kerberos) || return 1
  done
  # shellcheck disable=SC2046
  for f in kv_server kv_client; do
    g++ -o "build/$f-pkgconfig" "$out/$f.o" "$out/kv.pb.o" "$out/kv.authrpc.o" \
      $(pkg --libs authrpc-protobuf authrpc-kerberos) || return 1
  done
}

# kv_pairs SERVER CLIENT SERVER CLIENT: each kv_server and kv_client pair
# in a throwaway Kerberos realm on loopback (scripts/kdc, as installed), the
# first over tcp:// on a port the server picks, the second over unix:. A
# subshell, so that the realm's environment stays in it; each server is
# stopped by its pid, the KDC by its directory, whatever happened.
kv_pairs() (
  local realm=$PWD/build/consumer-realm server_pid=""
  rm -rf "$realm"
  trap '[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; "$share/scripts/kdc" stop "$realm" >/dev/null || true' EXIT
  "$share/scripts/kdc" start "$realm" >/dev/null
  # shellcheck source=/dev/null  # written by scripts/kdc
  source "$realm/env"
  echo "-- the typed kv example, server and client as a pair with Kerberos: $1, $3"
  kv_pair "$realm" "$1" "$2" tcp://127.0.0.1:0 --service-principal "rpc/localhost@$AUTHRPC_REALM"
  kv_pair "$realm" "$3" "$4" "unix:$realm/kv.sock"
)

# kv_pair REALM SERVER CLIENT ENDPOINT CLIENT_FLAGS...: starts SERVER on
# ENDPOINT with REALM's service key, runs CLIENT on the endpoint it printed,
# stops SERVER (SIGTERM, by its pid, which kv_pairs's server_pid holds
# meanwhile) and fails unless both exited 0.
kv_pair() {
  local realm=$1 server=$2 client=$3 endpoint=$4 bound="" status=0 _
  shift 4
  "$server" "$endpoint" --keytab "$realm/rpc.keytab" --principal "rpc/localhost@$AUTHRPC_REALM" \
    >"$realm/server.out" &
  server_pid=$!
  for _ in $(seq 100); do
    bound=$(head -1 "$realm/server.out")
    [[ -n $bound ]] || ! kill -0 "$server_pid" 2>/dev/null && break
    sleep 0.05
  done
  if [[ -n $bound ]]; then
    "$client" "$bound" --kerberos "$@" || status=$?
  else
    echo "test: $server printed no endpoint" >&2
    status=1
  fi
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" || status=$((status ? status : $?))
  server_pid=""
  ((status == 0)) || echo "test: the kv pair $server, $client failed ($status)" >&2
  return "$status"
}
stage consumers consumers

stage docs bash scripts/check_docs.sh build

checks() {
  bash scripts/check_layers.sh build  # includes and library links follow the layers
  bash scripts/check_mechanism_names.sh
  python3 scripts/check_function_size.py
}
stage checks checks
