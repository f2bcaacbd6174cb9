#!/usr/bin/env bash
# Entry point of the authrpc image (docker/authrpc/Dockerfile): waits until
# what the command needs is there, then runs the command in its place.
# Compose's depends_on does not wait for readiness everywhere (podman-compose
# ignores its conditions), so every service waits for itself.
#
#   WAIT_FOR_FILES  files that must exist, e.g. "/realm/ready" (the KDC
#                   container writes it once krb5.conf and the keytabs are there)
#   WAIT_FOR_TCP    HOST:PORT pairs that must accept a TCP connection,
#                   e.g. "kdc:88 authrpc-server:7000" ([::1]:7000 for IPv6)
#   WAIT_TIMEOUT    seconds to wait for all of them (default 60)
set -euo pipefail

timeout=${WAIT_TIMEOUT:-60}
[[ $timeout =~ ^[0-9]+$ ]] || { echo "wait-for: WAIT_TIMEOUT must be seconds" >&2; exit 2; }
deadline=$((SECONDS + timeout))

wait_until() {  # DESCRIPTION COMMAND...
  local what=$1
  shift
  until "$@"; do
    if ((SECONDS >= deadline)); then
      echo "wait-for: gave up after ${timeout}s waiting for $what" >&2
      exit 1
    fi
    sleep 0.2
  done
}

tcp_open() {  # HOST PORT
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

for file in ${WAIT_FOR_FILES:-}; do
  wait_until "$file" test -e "$file"
done
for target in ${WAIT_FOR_TCP:-}; do
  host=${target%:*} port=${target##*:}
  host=${host#[} host=${host%]}
  [[ -n $host && $port =~ ^[0-9]+$ ]] || { echo "wait-for: bad HOST:PORT '$target'" >&2; exit 2; }
  wait_until "$target" tcp_open "$host" "$port"
done

(($#)) || { echo "wait-for: no command to run" >&2; exit 2; }
exec "$@"
