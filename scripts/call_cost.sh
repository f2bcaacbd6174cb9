#!/usr/bin/env bash
# Instructions per call under load, per side, counted by callgrind
# (docs/PERFORMANCE.md, "Calls under load"): runs `minibench calls --floors off`
# twice under valgrind --tool=callgrind, for D1 and D2 seconds, and divides
# the difference in each process's instruction count by the difference in
# calls it made (client: REQUEST frames encoded, server: RESPONSE frames,
# append_response or append_ok_response) —
# start-up, connecting and reporting cancel out; event-loop wake-ups and
# syscalls' user-space side are included, as batches make them. One
# transport per run.
#   [KEEP=DIR] scripts/call_cost.sh [BUILD_DIR] [TRANSPORT...]
# TRANSPORT is unix or tcp (default: unix tcp). K and D as the target's
# (CONCURRENCY=8, DEPTH=16); SERVER_THREADS=1. Under valgrind the threads of
# a process take turns, so batches can be larger than in a real run: compare
# counts with each other, and look at syscalls per call (strace -c -f) for
# what the kernel does. Needs valgrind and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true
transports=("$@")
[[ ${#transports[@]} -gt 0 ]] || transports=(unix tcp)
D1=${D1:-2}
D2=${D2:-6}
minibench=$BUILD_DIR/minibench/minibench
command -v valgrind >/dev/null || { echo "call_cost: valgrind is not installed" >&2; exit 1; }
[[ -x $minibench ]] || { echo "call_cost: no $minibench (build first)" >&2; exit 1; }
work=$(mktemp -d)
# KEEP=DIR: leave the callgrind files in DIR (for callgrind_annotate).
if [[ -n ${KEEP:-} ]]; then work=$KEEP; mkdir -p "$work"; else trap 'rm -rf "$work"' EXIT; fi

# Calls into the function named by $2 (a regex) in callgrind file $1.
calls_into() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
names, cfn, total = {}, None, 0
pat = re.compile(sys.argv[2])
for line in open(sys.argv[1], errors='replace'):
    if line.startswith('cfn='):
        m = re.match(r'\((\d+)\)(?: (.*))?', line[4:].strip())
        if m and m.group(2) is not None: names[m.group(1)] = m.group(2)
        cfn = names.get(m.group(1), '') if m else line[4:].strip()
    elif line.startswith('fn='):
        m = re.match(r'\((\d+)\)(?: (.*))?', line[3:].strip())
        if m and m.group(2) is not None: names[m.group(1)] = m.group(2)
    elif line.startswith('calls=') and cfn is not None and pat.search(cfn):
        total += int(line[6:].split()[0])
print(total)
EOF
}

# Prints "<client instructions> <client calls> <server instructions> <server calls>".
count() {
  local transport=$1 seconds=$2 dir=$work/$1-$2
  mkdir -p "$dir"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$minibench" calls \
    --concurrency "${CONCURRENCY:-8}" --depth "${DEPTH:-16}" --duration "$seconds" \
    --server-threads "${SERVER_THREADS:-1}" --transport "$transport" --tls off --floors off \
    --blocks 1 --quiet >"$dir/out" 2>"$dir/err" ||
    { cat "$dir/err" >&2; return 1; }
  local child client
  child=$(sed -n 's/.*server: child pid \([0-9]*\).*/\1/p' "$dir/out" "$dir/err" | head -1)
  [[ -n $child ]] || { echo "call_cost: no server child pid in minibench's output" >&2; return 1; }
  client=$(ls "$dir" | sed -n 's/^cg\.\([0-9]*\)$/\1/p' | grep -vx "$child" | head -1)
  echo "$(sed -n 's/^summary: //p' "$dir/cg.$client")" \
    "$(calls_into "$dir/cg.$client" '^authrpc::wire::append_request\(')" \
    "$(sed -n 's/^summary: //p' "$dir/cg.$child")" \
    "$(calls_into "$dir/cg.$child" '^authrpc::wire::append_(ok_)?response\(')"
}

printf '%-10s %12s %12s %10s\n' transport client/call server/call calls
for transport in "${transports[@]}"; do
  read -r c1 cn1 s1 sn1 < <(count "$transport" "$D1")
  read -r c2 cn2 s2 sn2 < <(count "$transport" "$D2")
  (( cn2 > cn1 && sn2 > sn1 )) || { echo "call_cost: no more calls in the longer run" >&2; exit 1; }
  printf '%-10s %12d %12d %10d\n' "$transport" $(( (c2 - c1) / (cn2 - cn1) )) \
    $(( (s2 - s1) / (sn2 - sn1) )) $(( cn2 - cn1 ))
done
