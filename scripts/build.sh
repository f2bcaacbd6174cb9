#!/usr/bin/env bash
# Configures and builds authrpc into BUILD_DIR (default: build/).
#   scripts/build.sh [--configure-only] [BUILD_DIR] [extra cmake args...]
# Uses, when installed: Ninja (a build directory made with Makefiles keeps
# them), ccache, and the fastest linker of mold and lld (docs/TESTING.md,
# "Keeping it fast").
set -euo pipefail
cd "$(dirname "$0")/.."
configure_only=0
if [[ ${1:-} == --configure-only ]]; then
  configure_only=1
  shift
fi
BUILD_DIR=${1:-build}
shift || true
JOBS=${JOBS:-$(nproc)}
args=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
# ccache makes rebuilds (and other checkouts of the tree) cheap;
# CCACHE_BASEDIR lets clones and worktrees at other paths share its entries.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]] && command -v ninja >/dev/null; then
  args+=(-G Ninja)
fi
if ! grep -qs '^AUTHRPC_LINKER:' "$BUILD_DIR/CMakeCache.txt"; then
  for linker in mold lld; do
    if command -v "$linker" >/dev/null || command -v "ld.$linker" >/dev/null; then
      args+=(-DAUTHRPC_LINKER="$linker")
      break
    fi
  done
fi
cmake -S . -B "$BUILD_DIR" "${args[@]}" "$@" >/dev/null
((configure_only)) || cmake --build "$BUILD_DIR" -j "$JOBS"
