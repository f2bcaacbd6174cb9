#!/usr/bin/env bash
# Entry point of the KDC image (docker/kdc/Dockerfile): the throwaway realm of
# scripts/kdc — the very script people run on a workstation, copied into the
# image as /usr/local/bin/authrpc-kdc — served to other containers.
#
#   kdc-entrypoint           set the realm up (first start) or restart it,
#                            then run krb5kdc in the foreground:
#                              authrpc-kdc start $REALM_DIR --foreground ...
#   kdc-entrypoint --health  exit 0 once the realm is ready and krb5kdc
#                            accepts TCP connections (compose healthcheck)
#
# REALM_DIR (a volume shared read-only with clients and servers) is the
# scripts/kdc directory: krb5.conf (KRB5_CONFIG), alice.keytab, rpc.keytab
# (the keys of every service principal), env, kdc.log (minibench --kdc-log
# counts it), the database and stash (a throwaway test realm: every container
# of the project may read them), and ready, written last. A restart keeps the
# database and the keytabs (a keytab is only added to for a principal it
# lacks), like scripts/kdc.
#
# Environment (defaults fit docker/compose.yml):
#   REALM               AUTHRPC.TEST
#   REALM_DIR           /realm
#   KDC_LISTEN          0.0.0.0        address krb5kdc binds (UDP and TCP)
#   KDC_PORT            88
#   KDC_HOST            kdc            how clients reach the KDC (krb5.conf)
#   SERVICE_PRINCIPALS  "rpc/authrpc-server" (rpc/localhost is always there)
#   TICKET_LIFETIME     1h             REALM max_life and krb5.conf ticket_lifetime
#   RENEW_LIFETIME      4h
#   PREAUTH             yes            "no": new principals need no pre-authentication
# The client principal is scripts/kdc's: alice (alice.keytab).
set -euo pipefail

REALM=${REALM:-AUTHRPC.TEST}
REALM_DIR=${REALM_DIR:-/realm}
KDC_LISTEN=${KDC_LISTEN:-0.0.0.0}
KDC_PORT=${KDC_PORT:-88}
KDC_HOST=${KDC_HOST:-kdc}
SERVICE_PRINCIPALS=${SERVICE_PRINCIPALS:-rpc/authrpc-server}
TICKET_LIFETIME=${TICKET_LIFETIME:-1h}
RENEW_LIFETIME=${RENEW_LIFETIME:-4h}
PREAUTH=${PREAUTH:-yes}
KDC_SCRIPT=${KDC_SCRIPT:-/usr/local/bin/authrpc-kdc}

die() { echo "kdc-entrypoint: $*" >&2; exit 1; }

# True if something accepts TCP connections on KDC_LISTEN:KDC_PORT.
kdc_port_open() {
  local addr=$KDC_LISTEN
  [[ $addr == 0.0.0.0 ]] && addr=127.0.0.1
  [[ $addr == :: ]] && addr=::1
  (exec 3<>"/dev/tcp/$addr/$KDC_PORT") 2>/dev/null
}

main() {
  case ${1:-} in
    --health) [[ -f $REALM_DIR/ready ]] && kdc_port_open ;;
    "")
      [[ $PREAUTH == yes || $PREAUTH == no ]] || die "PREAUTH must be yes or no"
      local args=(start "$REALM_DIR" --realm "$REALM" --port "$KDC_PORT" --listen "$KDC_LISTEN"
                  --kdc-host "$KDC_HOST" --ticket-lifetime "$TICKET_LIFETIME"
                  --renew-lifetime "$RENEW_LIFETIME" --foreground)
      [[ $PREAUTH == yes ]] || args+=(--no-preauth)
      local p
      for p in $SERVICE_PRINCIPALS; do args+=(--service "$p"); done
      # scripts/kdc refuses a port in use (krb5kdc sets SO_REUSEPORT, so a
      # second KDC on it would silently share it) and another realm's
      # directory; a pid file left by a killed container is stale here.
      rm -f "$REALM_DIR/kdc.pid"
      exec bash "$KDC_SCRIPT" "${args[@]}"
      ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
}

main "$@"
