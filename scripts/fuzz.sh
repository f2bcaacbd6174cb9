#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/FUZZING.md) with clang,
# ASan and UBSan, then runs each for SECONDS on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/ is never written to), up to
# AUTHRPC_FUZZ_JOBS (default: the number of cores) targets at a time.
#   scripts/fuzz.sh [--build-only | --run-only] [SECONDS] [TARGET...]
#                                             (default: 30 s, every target)
# The build directory is $AUTHRPC_FUZZ_BUILD_DIR (default build-fuzz/): a tree
# already configured with -DAUTHRPC_FUZZ=ON (scripts/test.sh's build-asan/,
# which builds the tests beside them) is built as it is, any other is
# configured for the fuzz targets alone. Exits non-zero if a target finds a
# crash, a leak, undefined behaviour or a timeout, after printing the input
# that did it (kept under $AUTHRPC_FUZZ_ARTIFACTS, default
# <build dir>/artifacts/). Extra libFuzzer flags: AUTHRPC_FUZZ_FLAGS="-jobs=2
# -workers=2". A corpus that should keep what the run found:
# AUTHRPC_FUZZ_CORPUS_OUT=DIR (DIR/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."
step=all
case ${1:-} in
  --build-only) step=build; shift ;;
  --run-only) step=run; shift ;;
esac
seconds=${1:-30}
shift || true
BUILD_DIR=${AUTHRPC_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
FUZZ_JOBS=${AUTHRPC_FUZZ_JOBS:-$(nproc)}

# -max_len per target: a little above its largest realistic input (a
# negotiation flight, a credentials file with a few tokens, a journal of a
# few dozen records, a request line and Host fields), so that time goes to
# structure, not to size.
declare -A max_len=(
  [frame_fuzz]=4096
  [negotiation_fuzz]=4096
  [token_fuzz]=2048
  [kerberos_ticket_fuzz]=2048
  [credentials_file_fuzz]=8192
  [token_journal_fuzz]=8192
  [config_fuzz]=4096
  [jwt_fuzz]=4096
  [jwt_claims_fuzz]=2048
  [admin_request_fuzz]=1024
)
targets=("$@")
((${#targets[@]})) || targets=(frame_fuzz negotiation_fuzz token_fuzz kerberos_ticket_fuzz
                               credentials_file_fuzz token_journal_fuzz config_fuzz jwt_fuzz
                               jwt_claims_fuzz admin_request_fuzz)
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "fuzz: unknown target $t (known: ${!max_len[*]})" >&2; exit 2; }
done

if [[ $step != run ]]; then
  build_start=$(date +%s)
  echo "== fuzz: building ${targets[*]} in $BUILD_DIR (clang, ASan+UBSan+libFuzzer)"
  if ! grep -qs '^AUTHRPC_FUZZ:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
    CC=${CC_FUZZ:-clang} CXX=${CXX_FUZZ:-clang++} bash scripts/build.sh --configure-only "$BUILD_DIR" \
      -DAUTHRPC_FUZZ=ON -DAUTHRPC_BUILD_TESTS=OFF -DAUTHRPC_BUILD_MINIBENCH=OFF
  fi
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
  echo "== fuzz: built in $(( $(date +%s) - build_start )) s"
fi
[[ $step == build ]] && exit 0

# Everything a run writes goes under one directory, removed at the end: the
# targets' scratch files ($TMPDIR; on /dev/shm when possible, as the token
# store and the credentials file fsync) and the working corpora.
parent=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && parent=/dev/shm
work=$(mktemp -d "$parent/authrpc-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
artifacts=${AUTHRPC_FUZZ_ARTIFACTS:-$BUILD_DIR/artifacts}
mkdir -p "$artifacts"
artifacts=$(cd "$artifacts" && pwd)

symbolizer=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
[[ -n $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer

bin=$(cd "$BUILD_DIR/tests/fuzz" && pwd)
# Runs target $1 into $work/$1.log; its status is the target's.
run_target() {
  local t=$1 corpus=$work/corpus/$1
  mkdir -p "$corpus" "$work/tmp/$t"
  cp -R tests/fuzz/corpus/"$t"/. "$corpus"/ 2>/dev/null || true
  # shellcheck disable=SC2086 # AUTHRPC_FUZZ_FLAGS is a list of flags
  (cd "$work/tmp/$t" && TMPDIR=$work/tmp/$t "$bin/$t" \
     -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$artifacts/$t-" ${AUTHRPC_FUZZ_FLAGS:-} \
     "$corpus") >"$work/$t.log" 2>&1
}

# Reports target $1 after its run ended with status $2; non-zero if it found
# something.
report_target() {
  local t=$1 status=$2 log=$work/$1.log input
  if ((status != 0)); then
    tail -n 80 "$log"
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: $t FAILED on ${input:-an input in $artifacts/}" >&2
    echo "fuzz: reproduce with $bin/$t ${input:-<input>}" >&2
    return 1
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log" |
    sed "s/^/  $t /"
  if [[ -n ${AUTHRPC_FUZZ_CORPUS_OUT:-} ]]; then
    mkdir -p "$AUTHRPC_FUZZ_CORPUS_OUT/$t"
    cp -R "$work/corpus/$t"/. "$AUTHRPC_FUZZ_CORPUS_OUT/$t"/
  fi
}

echo "== fuzz: ${#targets[@]} targets for ${seconds} s each, $FUZZ_JOBS at a time"
declare -A running=()  # pid -> target
failed=0
for t in "${targets[@]}" ""; do
  # Waits for a run to end while FUZZ_JOBS run, and for all of them at the end.
  while ((${#running[@]} >= FUZZ_JOBS || (${#running[@]} > 0 && ${#t} == 0))); do
    set +e
    wait -n -p done_pid "${!running[@]}"
    status=$?
    set -e
    report_target "${running[$done_pid]}" "$status" || failed=1
    unset "running[$done_pid]"
  done
  [[ -z $t ]] && break
  ((failed)) && break
  echo "== fuzz: $t (max_len ${max_len[$t]})"
  run_target "$t" &
  running[$!]=$t
done
if ((failed)); then
  for pid in "${!running[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait || true
  exit 1
fi
echo "== fuzz: ${#targets[@]} targets, ${seconds} s each, no finding"
