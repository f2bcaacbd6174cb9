#!/usr/bin/env bash
# Instructions per session, per side, counted by callgrind (docs/PERFORMANCE.md,
# "CPU per session"): runs `minibench sessions --floors off` twice under
# valgrind --tool=callgrind, with N1 and N2 timed sessions per row, and
# divides the difference in each process's instruction count by N2 - N1 —
# start-up, the realm, warm-up and reporting cancel out. One row per run, so
# that each count is that row's alone.
#   scripts/session_cost.sh [BUILD_DIR] [ROW...]
# ROW is METHOD/TRANSPORT (default: simple/unix simple/tcp token/unix
# token/tcp kerberos/unix kerberos/tcp). Counts are exact and repeatable for
# the same binary, whatever else the machine does; times under valgrind mean
# nothing. Needs valgrind; the kerberos and token rows need the Kerberos
# tools (krb5-kdc, krb5-admin-server), as minibench does.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true
rows=("$@")
[[ ${#rows[@]} -gt 0 ]] || rows=(simple/unix simple/tcp token/unix token/tcp kerberos/unix kerberos/tcp)
N1=${N1:-200}
N2=${N2:-1200}
minibench=$BUILD_DIR/minibench/minibench
command -v valgrind >/dev/null || { echo "session_cost: valgrind is not installed" >&2; exit 1; }
[[ -x $minibench ]] || { echo "session_cost: no $minibench (build first)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Prints "<client instructions> <server instructions>" for one run.
count() {
  local method=$1 transport=$2 n=$3 dir=$work/$1-$2-$3
  mkdir -p "$dir"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$minibench" sessions \
    --method "$method" --transport "$transport" --tls off --floors off --blocks 1 \
    --warmup 20 -n "$n" --quiet >"$dir/out" 2>"$dir/err" ||
    { cat "$dir/err" >&2; return 1; }
  local child client
  child=$(sed -n 's/.*server: child pid \([0-9]*\).*/\1/p' "$dir/out" "$dir/err" | head -1)
  [[ -n $child ]] || { echo "session_cost: no server child pid in minibench's output" >&2; return 1; }
  client=$(ls "$dir" | sed -n 's/^cg\.\([0-9]*\)$/\1/p' | grep -vx "$child" | head -1)
  echo "$(instructions "$dir/cg.$client") $(instructions "$dir/cg.$child")"
}

# The instructions in callgrind file $1, less those of the realm's start-up
# check for a stale KDC on its port (MiniKdc::wait_until_serving reads
# /proc/net/tcp*, a line per socket of the machine — TIME_WAIT ones too,
# tens of thousands after a benchmark — so its cost differs from run to run
# and is no session's). The server child is forked after the realm starts
# and carries the count, so both processes subtract it.
instructions() {
  local total check
  total=$(sed -n 's/^summary: //p' "$1")
  check=$(callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    sed -n 's/^ *\([0-9,]*\) .*MiniKdc::wait_until_serving(int) \[.*/\1/p' | head -1 | tr -d ,)
  [[ -n $total ]] && echo $(( total - ${check:-0} ))
}

printf '%-16s %14s %14s\n' row "client/session" "server/session"
for row in "${rows[@]}"; do
  method=${row%/*} transport=${row#*/}
  # Not `read < <(count ...)`: a failed run would go unseen and print nonsense.
  first=$(count "$method" "$transport" "$N1") || exit 1
  second=$(count "$method" "$transport" "$N2") || exit 1
  read -r c1 s1 <<<"$first"
  read -r c2 s2 <<<"$second"
  if [[ -z $c1 || -z $s1 || -z $c2 || -z $s2 ]]; then
    echo "session_cost: $row: no instruction count (a run failed)" >&2
    exit 1
  fi
  printf '%-16s %14d %14d\n' "$row" $(( (c2 - c1) / (N2 - N1) )) $(( (s2 - s1) / (N2 - N1) ))
done
