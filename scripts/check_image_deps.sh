#!/usr/bin/env bash
# Checks that docker/authrpc/Dockerfile's runtime stage installs every Debian
# package whose libraries the installed binaries load, so that a new link
# dependency fails CI instead of the image build (or its first run).
#   scripts/check_image_deps.sh BIN_DIR [DOCKERFILE]
# A library passes when the package that ships it is listed in the runtime
# stage's `apt-get install`, or is a dependency (at any depth) of one listed
# there, or is one the base image cannot lack (libc6, libgcc-s1, libstdc++6:
# apt itself needs them). Plugins loaded with dlopen() never show in ldd, so
# the SASL plugin packages must be listed by name.
set -euo pipefail
bin_dir=${1:?usage: check_image_deps.sh BIN_DIR [DOCKERFILE]}
dockerfile=${2:-$(dirname "$0")/../docker/authrpc/Dockerfile}
dlopened=(libsasl2-modules libsasl2-modules-gssapi-mit)

# The runtime stage: everything after the last FROM; its apt-get install lines
# up to the first line that ends the command (`&&` or no continuation).
listed=$(awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' "$dockerfile" |
  sed -n '/apt-get install/,/&&\|[^\\]$/p' | tr ' \\\t' '\n\n\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm|update)$' | sort -u)
[[ -n $listed ]] || { echo "check_image_deps: no apt-get install in the runtime stage of $dockerfile" >&2; exit 1; }

# The listed packages and, recursively, what they depend on (as installed here).
declare -A closure=([libc6]=1 [libgcc-s1]=1 [libstdc++6]=1)
queue=($listed)
while ((${#queue[@]})); do
  p=${queue[0]}; queue=("${queue[@]:1}")
  [[ -n ${closure[$p]:-} && ${closure[$p]} == 2 ]] && continue
  closure[$p]=2
  deps=$(dpkg-query -W -f='${Depends},${Pre-Depends}' "$p" 2>/dev/null || true)
  for d in $(tr ',|' '\n\n' <<<"$deps" | sed -E 's/\(.*\)//; s/:any//; s/[[:space:]]//g' | grep -v '^$'); do
    [[ ${closure[$d]:-} == 2 ]] || queue+=("$d")
  done
done

status=0
checked=0
for p in "${dlopened[@]}"; do
  grep -qx "$p" <<<"$listed" || { echo "check_image_deps: $dockerfile must install $p (loaded with dlopen)" >&2; status=1; }
done
# Which binaries load each library (by its real path), then one dpkg query
# for all of them (each query reads dpkg's whole database): under a merged
# /usr a library's path may be recorded with or without its /usr prefix.
declare -A users=() owner=()
for bin in "$bin_dir"/*; do
  [[ -x $bin && -f $bin ]] || continue
  [[ $(head -c4 "$bin" | od -An -c | tr -d ' ') == 177ELF ]] || continue
  checked=$((checked + 1))
  while read -r lib; do
    real=$(readlink -f "$lib")
    users[$real]+="${users[$real]:+ }$(basename "$bin")"
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
done
queries=()
for real in "${!users[@]}"; do
  queries+=("$real" "${real#/usr}" "/usr$real")
done
if ((${#queries[@]})); then
  while IFS= read -r line; do
    pkg=${line%%: /*} path=/${line#*: /}
    pkg=${pkg%%,*}
    owner[$path]=${pkg%%:*}
  done < <(dpkg -S "${queries[@]}" 2>/dev/null || true)
fi
for real in "${!users[@]}"; do
  pkg=${owner[$real]:-${owner[${real#/usr}]:-${owner[/usr$real]:-}}}
  if [[ -z $pkg ]]; then
    echo "check_image_deps: ${users[$real]} needs $real, which no installed package ships" >&2; status=1
  elif [[ -z ${closure[$pkg]:-} ]]; then
    echo "check_image_deps: ${users[$real]} needs $real from package $pkg, which $dockerfile's runtime stage does not install" >&2
    status=1
  fi
done
((status == 0)) && echo "check_image_deps: the runtime image installs every library of $checked binaries"
exit $status
