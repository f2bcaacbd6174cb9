#!/usr/bin/env bash
# Installs the Debian 12 packages authrpc needs to build, test and benchmark,
# skipping those already installed. Non-interactive and idempotent; run as root.
set -euo pipefail

PACKAGES=(
  g++ cmake make
  libasio-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev googletest
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
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
