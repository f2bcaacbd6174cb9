#!/usr/bin/env bash
# Installs the Debian 12 packages authrpc needs to build, test and benchmark,
# skipping those already installed. Non-interactive and idempotent; run as root.
set -euo pipefail

PACKAGES=(
  g++ cmake make pkg-config
  # The build loop (docs/TESTING.md, "Keeping it fast"): Ninja schedules the
  # two cores better than make and logs each step's time, ccache makes a
  # rebuild of an unchanged file a copy, mold links in a fraction of ld's time.
  ninja-build ccache mold
  libasio-dev nlohmann-json3-dev
  libssl-dev  # OpenSSL 3: HMAC, digests, CSPRNG, base64 (delegation tokens)
  libcurl4-openssl-dev  # libcurl: the jwt mechanism's JWKS fetch, the tests' HTTP requests
  libgtest-dev libgmock-dev googletest
  # Kerberos: a real MIT KDC for tests/benchmarks (scripts/kdc, tests/mini_kdc.*),
  # the GSSAPI/krb5 headers, and Cyrus SASL with its GSSAPI plugin.
  krb5-kdc krb5-admin-server krb5-user libkrb5-dev
  libsasl2-dev libsasl2-modules-gssapi-mit
  libsasl2-modules  # DIGEST-MD5 and SCRAM plugins (token interop, docs/TOKENS.md)
  iproute2  # ss(8), used by scripts/kdc to check its port
  python3  # scripts/jwt-issuer (docs/JWT.md's run example), scripts/call_cost.sh
  faketime  # libfaketime: the clock-skew case of tests/kerberos_itest.cc
  # ZooKeeper token store: the C client, and a server for tests/testing/mini_zk.h
  libzookeeper-mt-dev zookeeper
  # A real OIDC issuer for the jwt tests (tests/testing/glewlwyd_idp.h) and sqlite3;
  # dbconfig-sqlite3 satisfies its database dependency without a MariaDB client.
  glewlwyd dbconfig-sqlite3
  # The admin listener (component `admin`, components/admin/admin_server.h):
  # prometheus-cpp's text serializer (its -dev package also brings civetweb, which
  # its CMake package looks for; authrpc links only libprometheus-cpp-core) and
  # libmicrohttpd; Prometheus itself and promtool for the tests that scrape it and
  # lint /metrics.
  prometheus-cpp-dev libmicrohttpd-dev prometheus
  # Typed services (component `protobuf`, components/protobuf/): protoc, the
  # C++ runtime generated code links, and the compiler library
  # protoc-gen-authrpc (tools/protoc_gen_authrpc.cc) is a plugin of.
  protobuf-compiler libprotobuf-dev libprotoc-dev
  # Fuzzing (scripts/fuzz.sh, docs/FUZZING.md): clang 14, libFuzzer and the
  # sanitizer runtimes (not pulled in by clang without recommends), and
  # llvm-symbolizer for readable stacks.
  clang libclang-rt-14-dev llvm-14
)

# Tests run their own throwaway KDCs on free loopback ports; the system KDC and
# kadmind are never used. krb5kdc sets SO_REUSEPORT, so a stray one is worse than
# useless: stop them if a package script (or a boot) started them, by their pidfiles.
# Likewise the system Prometheus (0.0.0.0:9090, scraping nothing of ours): the
# tests start their own on a free loopback port.
stop_system_kdc() {
  local svc name pidfile
  for svc in krb5-kdc:krb5kdc krb5-admin-server:kadmind prometheus:prometheus/prometheus; do
    name=${svc#*:} svc=${svc%%:*}
    pidfile=/run/$name.pid
    [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null || continue
    echo "setup: stopping the system $svc service (tests start their own)"
    if [[ -d /run/systemd/system ]]; then
      systemctl stop "$svc" && systemctl disable --quiet "$svc" || true
    else
      "/etc/init.d/$svc" stop || true
    fi
  done
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  stop_system_kdc
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing packages: ${missing[*]} — run as root (or install them)" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
stop_system_kdc
