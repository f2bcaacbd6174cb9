#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/FUZZING.md) with clang,
# ASan and UBSan into build-fuzz/, then runs each for SECONDS on a copy of
# its seed corpus (tests/fuzz/corpus/<target>/ is never written to).
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 30 s, every target)
# Exits non-zero on the first target that finds a crash, a leak, undefined
# behaviour or a timeout, after printing the input that did it (kept under
# $AUTHRPC_FUZZ_ARTIFACTS, default build-fuzz/artifacts/). Extra libFuzzer
# flags: AUTHRPC_FUZZ_FLAGS="-jobs=2 -workers=2". A corpus that should keep
# what the run found: AUTHRPC_FUZZ_CORPUS_OUT=DIR (DIR/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
BUILD_DIR=${AUTHRPC_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}

# -max_len per target: a little above its largest realistic input (a
# negotiation flight, a credentials file with a few tokens, a journal of a
# few dozen records), so that time goes to structure, not to size.
declare -A max_len=(
  [frame_fuzz]=4096
  [negotiation_fuzz]=4096
  [token_fuzz]=2048
  [kerberos_ticket_fuzz]=2048
  [credentials_file_fuzz]=8192
  [token_journal_fuzz]=8192
  [config_fuzz]=4096
  [jwt_fuzz]=4096
)
targets=("$@")
((${#targets[@]})) || targets=(frame_fuzz negotiation_fuzz token_fuzz kerberos_ticket_fuzz
                               credentials_file_fuzz token_journal_fuzz config_fuzz jwt_fuzz)
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "fuzz: unknown target $t (known: ${!max_len[*]})" >&2; exit 2; }
done

build_start=$(date +%s)
echo "== fuzz: building ${targets[*]} in $BUILD_DIR (clang, ASan+UBSan+libFuzzer)"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" "${launcher[@]}" -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUTHRPC_FUZZ=ON -DAUTHRPC_BUILD_TESTS=OFF \
  -DAUTHRPC_BUILD_MINIBENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
echo "== fuzz: built in $(( $(date +%s) - build_start )) s"

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
for t in "${targets[@]}"; do
  corpus=$work/corpus/$t
  mkdir -p "$corpus" "$work/tmp/$t"
  cp -R tests/fuzz/corpus/"$t"/. "$corpus"/ 2>/dev/null || true
  log=$work/$t.log
  echo "== fuzz: $t for ${seconds} s (max_len ${max_len[$t]})"
  # shellcheck disable=SC2086 # AUTHRPC_FUZZ_FLAGS is a list of flags
  if ! (cd "$work/tmp/$t" && TMPDIR=$work/tmp/$t "$bin/$t" \
          -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 -artifact_prefix="$artifacts/$t-" ${AUTHRPC_FUZZ_FLAGS:-} \
          "$corpus") >"$log" 2>&1; then
    tail -n 80 "$log"
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: $t FAILED on ${input:-an input in $artifacts/}" >&2
    echo "fuzz: reproduce with $bin/$t ${input:-<input>}" >&2
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log" |
    sed "s/^/  $t /"
  if [[ -n ${AUTHRPC_FUZZ_CORPUS_OUT:-} ]]; then
    mkdir -p "$AUTHRPC_FUZZ_CORPUS_OUT/$t"
    cp -R "$corpus"/. "$AUTHRPC_FUZZ_CORPUS_OUT/$t"/
  fi
done
echo "== fuzz: ${#targets[@]} targets, ${seconds} s each, no finding"
