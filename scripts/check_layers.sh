#!/usr/bin/env bash
# Checks that authrpc's sources and libraries follow its layers
# (docs/DESIGN.md, "Libraries"), a folder each:
#   base/ → security/ → rpc/ → auth/ → server/, client/
# with the optional components beside them, a folder each in components/:
#   kerberos   (components/kerberos/) of two levels: kerberos_credentials.*
#              and kerberos_errors.* hold credentials and their errors at the
#              security level (group kerberos-credentials: base/ and
#              security/ below them); the rest, the mechanisms (kerberos,
#              kerberos-sasl, token-digest, token-scram) and their Cyrus SASL
#              wrapper, are at the auth level.
#   jwt        (components/jwt/) the jwt mechanism, at the auth level.
#   zookeeper  (components/zookeeper/) a token store, at the security level.
#   admin      (components/admin/) the HTTP admin listener, on top of server/.
#   protobuf   (components/protobuf/) typed services: server bindings on
#              server/, stubs on client/; its protoc plugin
#              (tools/protoc_gen_authrpc.cc) and the CLI include it.
# and the all-built-ins library that links them: auth/builtin_mechanisms.cc
# and security/builtin_token_stores.cc, each beside the registry whose
# with_builtins() it defines, and so named here. The programs' own sources,
# apart from the libraries, are in tools/; their command-line parser there
# (tools/flag_parser.*, cli_args.*, cli_exit.*: group flags) is a library
# of base/ alone, which minibench links too.
#   scripts/check_layers.sh [BUILD_DIR]
# 1. Every `#include "authrpc/<dir>/..."` in those directories goes down (or
#    sideways within its own layer): base includes nothing of authrpc's;
#    security/ only base and security/; rpc/ also nothing above it; auth/ not
#    server/ or client/; server/ and client/ never each other. A component's
#    headers are included only by the component itself, the built-ins
#    library, the programs (authrpc-server, the CLI, minibench, examples) and
#    tests.
# 2. With BUILD_DIR (a configured build tree), the same from CMake's side:
#    no authrpc library links a library of a higher layer or a component it
#    must not (read from `cmake --graphviz`).
# Prints file:line (or the offending link) for each violation; exit 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."

# The group a source file or a header belongs to.
group_of() {
  case $1 in
    base/*) echo base ;;
    components/kerberos/kerberos_credentials.* | components/kerberos/kerberos_errors.*)
      echo kerberos-credentials ;;
    components/kerberos/*) echo kerberos ;;
    components/jwt/*) echo jwt ;;
    components/zookeeper/*) echo zookeeper ;;
    components/admin/*) echo admin ;;
    components/protobuf/*) echo protobuf ;;
    auth/builtin_mechanisms.cc | security/builtin_token_stores.cc) echo builtins ;;
    # The programs' own sources (CMakeLists.txt: authrpc-server, authrpc).
    # The command-line parser they and minibench share (authrpc_cli_flags).
    tools/flag_parser.* | tools/cli_args.* | tools/cli_exit.*) echo flags ;;
    tools/authrpc_server_main.cc) echo server-program ;;
    tools/*) echo client-program ;;
    security/*) echo security ;;
    rpc/*) echo rpc ;;
    auth/*) echo auth ;;
    server/*) echo server ;;
    client/*) echo client ;;
    *) echo other ;;
  esac
}

# What each group may include (or, for libraries, link).
declare -A allowed=(
  [base]="base"
  [security]="base security"
  [zookeeper]="base security zookeeper"
  [rpc]="base security rpc"
  [auth]="base security rpc auth"
  [kerberos-credentials]="base security kerberos-credentials"
  [kerberos]="base security rpc auth kerberos-credentials kerberos"
  [jwt]="base security rpc auth jwt"
  [builtins]="base security rpc auth kerberos-credentials kerberos jwt zookeeper"
  [server]="base security rpc auth server"
  [admin]="base security rpc auth server admin"
  [protobuf]="base security rpc auth server client protobuf"
  [client]="base security rpc auth client"
  [flags]="base flags"
  [server-program]="base security rpc auth kerberos-credentials kerberos zookeeper server admin flags server-program"
  [client-program]="base security rpc auth kerberos-credentials kerberos jwt zookeeper client protobuf flags client-program"
)

violations=0
report() {
  echo "check_layers: $*" >&2
  violations=$((violations + 1))
}

# 1. Includes.
while IFS= read -r file; do
  from=$(group_of "$file")
  [[ -n ${allowed[$from]:-} ]] || continue
  while IFS=: read -r line header; do
    to=$(group_of "$header")
    [[ $to == other ]] && continue
    [[ " ${allowed[$from]} " == *" $to "* ]] ||
      report "$file:$line: includes \"$header\" ($to), which $from code must not"
  done < <(awk '/^[ \t]*#[ \t]*include[ \t]*"[a-z_]+\// {
                 match($0, /"[^"]*"/); h = substr($0, RSTART + 1, RLENGTH - 2)
                 sub(/^authrpc\//, "", h); print FNR ":" h }' "$file")
done < <(git ls-files 'base/*.h' 'base/*.cc' 'security/*.h' 'security/*.cc' 'rpc/*.h' 'rpc/*.cc' \
           'auth/*.h' 'auth/*.cc' 'server/*.h' 'server/*.cc' 'client/*.h' 'client/*.cc' \
           'components/*.h' 'components/*.cc' 'tools/*.h' 'tools/*.cc')

# 2. Library links, as CMake resolved them.
if [[ $# -ge 1 ]]; then
  build_dir=$1
  [[ -f $build_dir/CMakeCache.txt ]] || { echo "check_layers: $build_dir is not a configured build tree" >&2; exit 2; }
  dot=$(mktemp -d)
  trap 'rm -rf "$dot"' EXIT
  cmake -S . -B "$build_dir" --graphviz="$dot/targets.dot" >/dev/null
  declare -A target_group=(
    [authrpc_base]=base [authrpc_security]=security [authrpc_rpc]=rpc [authrpc_auth]=auth
    [authrpc_kerberos]=kerberos [authrpc_jwt]=jwt [authrpc_zookeeper]=zookeeper
    [authrpc_builtins]=builtins
    [authrpc_server]=server [authrpc_client]=client [authrpc_admin]=admin [authrpc_protobuf]=protobuf
    [authrpc_cli_flags]=flags
  )
  declare -A name_of=()
  while IFS=$'\t' read -r node name; do
    name_of[$node]=$name
  done < <(sed -n 's/^[[:space:]]*"\(node[0-9]*\)" \[ label = "\([^"\\]*\).*/\1\t\2/p' "$dot/targets.dot")
  libraries=0
  while IFS=$'\t' read -r a b; do
    from=${name_of[$a]:-} to=${name_of[$b]:-}
    [[ -n ${target_group[$from]:-} ]] || continue
    libraries=1
    to_group=${target_group[$to]:-}
    [[ -z $to_group ]] && continue  # a third-party library
    [[ " ${allowed[${target_group[$from]}]} " == *" $to_group "* ]] ||
      report "CMake: $from links $to, a $to_group library, which ${target_group[$from]} must not link"
  done < <(sed -n 's/^[[:space:]]*"\(node[0-9]*\)" -> "\(node[0-9]*\)".*/\1\t\2/p' "$dot/targets.dot")
  ((libraries)) || report "CMake: no authrpc library found in $build_dir's target graph"
fi

if ((violations)); then
  echo "check_layers: $violations violation(s) of the layers (docs/DESIGN.md, \"Libraries\")" >&2
  exit 1
fi
if [[ $# -ge 1 ]]; then
  echo "check_layers: includes and the library links of $1 follow the layers"
else
  echo "check_layers: includes follow the layers"
fi
