#!/usr/bin/env bash
# Prepares podman 4.3 + podman-compose 1.0.3 (Debian 12) to build and run
# docker/compose.yml with docker/compose.host.yml where there is no Docker
# engine, no registry and no container network: host networking only
# (docker/README.md, "podman with host networking"). Run as root.
#
#   docker/podman-host.sh DIR [MIRROR]
#
# writes into DIR (outside the checkout):
#   containers.conf  for CONTAINERS_CONF: every container in the host's network
#                    namespace, runc (crun fails on some cgroup v1 layouts),
#                    cgroupfs and file events (no systemd), and nofile/nproc
#                    limits podman can grant (its default nofile is refused
#                    where the hard limit is lower)
#   podman-hostnet   for podman-compose --podman-path: podman-compose 1.0.3
#                    creates a <project>_default bridge network and passes
#                    `--net <project>_default --network-alias <service>` even
#                    with network_mode: host; the wrapper answers `network
#                    exists|create` with success and drops those flags
#                    (keeping `--network host`), so no network is ever made
# and, unless podman already has it, the base image BASE_IMAGE (default
# localhost/debian:bookworm):
# debootstrap --variant=minbase from MIRROR (default http://deb.debian.org/debian)
# with bookworm and bookworm-updates, and bookworm-security from SECURITY_MIRROR
# (default http://deb.debian.org/debian-security), imported with
# `podman import` (the Dockerfiles take it as BASE_IMAGE).
set -euo pipefail

dir=${1:?usage: podman-host.sh DIR [MIRROR]}
mirror=${2:-http://deb.debian.org/debian}
base=${BASE_IMAGE:-localhost/debian:bookworm}
mkdir -p "$dir"
dir=$(realpath -- "$dir")

nofile=$(ulimit -Hn)
[[ $nofile == unlimited ]] && nofile=1048576
cat >"$dir/containers.conf" <<EOF
[containers]
netns = "host"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF

cat >"$dir/podman-hostnet" <<'EOF'
#!/usr/bin/env bash
# podman for podman-compose 1.0.3 with host networking only (written by
# docker/podman-host.sh): `network exists|create` succeed without doing
# anything; --network-alias and every --net/--network but "host" are dropped.
if [[ ${1:-} == network && ( ${2:-} == exists || ${2:-} == create ) ]]; then
  exit 0
fi
args=()
drop_next=0 net_next=0
for a in "$@"; do
  if ((drop_next)); then drop_next=0; continue; fi
  if ((net_next)); then
    net_next=0
    [[ $a == host ]] && args+=(--network host)
    continue
  fi
  case $a in
    --network-alias) drop_next=1 ;;
    --net|--network) net_next=1 ;;
    --net=host|--network=host) args+=(--network host) ;;
    --network-alias=*|--net=*|--network=*) ;;
    *) args+=("$a") ;;
  esac
done
exec podman "${args[@]}"
EOF
chmod 755 "$dir/podman-hostnet"

export CONTAINERS_CONF=$dir/containers.conf
if podman image exists "$base"; then
  echo "podman-host: $base exists"
else
  rootfs=$(mktemp -d "$dir/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "podman-host: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$dir/debootstrap.log"
  rm -f "$rootfs/etc/apt/sources.list"
  security=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  echo "podman-host: imported $base"
fi

cat <<EOF
podman-host: ready. From the repository root:
  export CONTAINERS_CONF=$dir/containers.conf
  pc=(podman-compose --podman-path $dir/podman-hostnet
      --podman-build-args='--network host --build-arg BASE_IMAGE=$base'
      -f docker/compose.yml -f docker/compose.host.yml)
  "\${pc[@]}" up --build --exit-code-from minibench; "\${pc[@]}" down -v
EOF
