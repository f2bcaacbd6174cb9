#!/usr/bin/env bash
# Runs the documentation's shell examples, so that they cannot drift from the
# code (scripts/test.sh and so CI call it).
#
#   scripts/check_docs.sh [BUILD_DIR]      (default: build)
#   CHECK_DOCS_VERBOSE=1 shows every block's output, not only a failed one's.
#
# A ```sh block of README.md, minibench/README.md or docs/*.md runs when the
# line before its fence is `<!-- ci: run -->`; `<!-- ci: skip: REASON -->`
# says why one does not. Every ```sh block of these files must carry one of
# the two, so a new example is either tested or explains why not.
#
# Each block runs on its own, as a reader would paste it, in `bash -e`:
#  - in a scratch directory that looks like the checkout (build/, scripts/,
#    examples/ link to the real ones; build/ is BUILD_DIR), with the PATH a
#    user has (the build is not on it: a block says build/authrpc, as a
#    reader in a fresh checkout must) and TMPDIR inside the scratch
#    directory;
#  - without the caller's Kerberos and token variables;
#  - in a session of its own (setsid): whatever it leaves running (a server)
#    is killed by that session's process group id when it ends, a realm of
#    scripts/kdc is stopped by its pid file, and after BLOCK_TIMEOUT seconds
#    (default 60) the block is killed and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath -- "${1:-build}")
timeout_s=${BLOCK_TIMEOUT:-60}
[[ -x $build/authrpc && -x $build/authrpc-server ]] || {
  echo "check_docs: no authrpc and authrpc-server in $build (build first)" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Splits FILE's marked blocks into $work/blocks/N.sh and N.where; with
# STRICT=1, an unmarked ```sh block is an error.
extract() {
  local file=$1 strict=$2
  awk -v file="$file" -v out="$work/blocks" -v strict="$strict" '
    function flush() { close(script); }
    BEGIN { n = 0; while ((getline line < (out "/count")) > 0) n = line + 0; close(out "/count") }
    inblock && /^```/ { inblock = 0; prev = "```"; flush(); next }
    inblock { if (run) print > script; next }
    /^```sh[[:space:]]*$/ {
      inblock = 1
      run = (prev ~ /^<!-- ci: run -->/)
      if (!run && prev !~ /^<!-- ci: skip: .+-->/ && strict) {
        printf "check_docs: %s:%d: ```sh block without <!-- ci: run --> or <!-- ci: skip: REASON -->\n", file, NR > "/dev/stderr"
        bad = 1
      }
      if (run) {
        n++
        script = out "/" n ".sh"
        printf "%s:%d\n", file, NR > (out "/" n ".where"); close(out "/" n ".where")
      }
      next
    }
    { if ($0 !~ /^[[:space:]]*$/) prev = $0 }
    END { print n > (out "/count"); exit bad }
  ' "$file"
}

# The caller's PATH without any directory holding authrpc binaries (a
# build tree, an install prefix the test command made): a block finds them
# where the docs say they are.
user_path() {
  local dir out=""
  local IFS=:
  for dir in $PATH; do
    [[ -x $dir/authrpc || -x $dir/authrpc-server ]] && continue
    out+=${out:+:}$dir
  done
  echo "$out"
}

mkdir -p "$work/blocks"
echo 0 >"$work/blocks/count"
status=0
extract README.md 1 || status=1
extract minibench/README.md 1 || status=1
for doc in docs/*.md; do extract "$doc" 1 || status=1; done
count=$(<"$work/blocks/count")

# The checkout as the blocks expect to see it, without letting them write
# into it.
mkdir -p "$work/tree" "$work/tmp"
ln -s "$root/scripts" "$root/examples" "$work/tree/"
ln -s "$build" "$work/tree/build"

for ((i = 1; i <= count; i++)); do
  where=$(<"$work/blocks/$i.where")
  start=$(date +%s.%N)
  (
    cd "$work/tree"
    exec env -u KRB5CCNAME -u KRB5_CONFIG -u KRB5_KDC_PROFILE -u KRB5_KTNAME -u KRB5_CLIENT_KTNAME \
      -u KRB5RCACHEDIR -u AUTHRPC_TOKEN_FILE PATH="$(user_path)" TMPDIR="$work/tmp" \
      setsid bash -e "$work/blocks/$i.sh" </dev/null >"$work/blocks/$i.log" 2>&1
  ) &
  pid=$!  # setsid execs in place (a background job is no group leader): pid = session = group
  rc=""
  for ((t = 0; t < timeout_s * 10; t++)); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true
    rc="timeout after ${timeout_s} s"
  fi
  wait "$pid" && code=0 || code=$?
  kill -TERM -- "-$pid" 2>/dev/null || true  # what the block left running
  # scripts/kdc starts krb5kdc in a session of its own: stop each realm the
  # block left behind by its pid file.
  while IFS= read -r pidfile; do
    bash "$root/scripts/kdc" stop "$(dirname "$pidfile")" >/dev/null 2>&1 || true
  done < <(find "$work/tmp" -name kdc.pid 2>/dev/null)
  [[ -z $rc && $code -ne 0 ]] && rc="exit $code"
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [[ -n $rc ]]; then
    echo "check_docs: FAILED $where ($rc, ${took} s); its output:"
    sed 's/^/  | /' "$work/blocks/$i.log"
    status=1
  else
    echo "check_docs: ok $where (${took} s)"
    [[ ${CHECK_DOCS_VERBOSE:-0} == 1 ]] && sed 's/^/  | /' "$work/blocks/$i.log"
  fi
done
((count > 0)) || { echo "check_docs: no block marked <!-- ci: run -->" >&2; status=1; }
if ((status == 0)); then
  echo "check_docs: $count documentation blocks ran"
else
  echo "check_docs: FAILED (see above)" >&2
fi
exit "$status"
