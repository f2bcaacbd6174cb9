#!/usr/bin/env bash
# Runs `minibench idle` inside a throwaway QEMU guest, for a machine whose
# RLIMIT_NOFILE hard limit is below what `--connections N` needs and cannot
# be raised there (a container without CAP_SYS_RESOURCE: the 2-vCPU
# development machines stop at 20,000 descriptors, the idle target is set
# for 100,000 connections, one descriptor each on both sides).
#
#   scripts/idle_vm.sh [BUILD_DIR] [minibench idle arguments...]
#   e.g. scripts/idle_vm.sh build --connections 100000 --json idle.json
#
# The guest is Debian 12's own kernel (linux-image-amd64, downloaded with
# apt-get, not installed) with a busybox initramfs made here. It mounts this
# machine's root read-only over 9p as its own root, so it runs the same
# minibench, libraries and krb5kdc, with a tmpfs /tmp; as root in its own
# kernel it raises RLIMIT_NOFILE to 400,000, then runs minibench idle in a
# directory shared with this script (JSON written there is copied to the
# current directory: give --json a relative path) and powers off. Without
# /dev/kvm QEMU emulates the CPU (TCG; ~14x slower than the host on the
# development machines): compare the ratios minibench prints (memory per
# connection, p99 with the N held over the quiet p99), both measured inside
# the same guest, not its absolute times.
#
# Environment: VM_MEMORY (default 12G), VM_CPUS (default: this machine's),
# VM_CACHE (where the kernel package is kept; default a temporary directory).
# Needs root for apt-get if qemu-system-x86, busybox-static or cpio is missing.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
BUILD_DIR=build
if [[ $# -gt 0 && $1 != -* ]]; then BUILD_DIR=$1; shift; fi
BUILD_DIR=$(realpath "$BUILD_DIR")
MINIBENCH=$BUILD_DIR/minibench/minibench
[[ -x $MINIBENCH ]] || { echo "idle_vm: no $MINIBENCH (build first)" >&2; exit 2; }

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
# The initramfs has no libraries: busybox must be the static build.
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" ||
  need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
if ((${#need[@]})); then
  echo "idle_vm: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/idle-vm-XXXXXX")
trap 'rm -rf "$work"' EXIT
cache=${VM_CACHE:-$work/cache}
mkdir -p "$cache" "$work/kernel" "$work/initrd"/{bin,mods,proc,sys,dev,newroot} "$work/out"
chmod 755 "$work/out"

# The kernel: the versioned package linux-image-amd64 depends on.
kpkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
[[ -n $kpkg ]] || { echo "idle_vm: apt-cache knows no linux-image-amd64" >&2; exit 1; }
if ! ls "$cache/$kpkg"_*.deb >/dev/null 2>&1; then
  (cd "$cache" && apt-get download "$kpkg" >/dev/null 2>&1) ||
    { echo "idle_vm: apt-get download $kpkg failed" >&2; exit 1; }
fi
dpkg-deb -x "$cache/$kpkg"_*.deb "$work/kernel"
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-*)
modules=$(ls -d "$work"/kernel/lib/modules/*)/kernel

# The initramfs: busybox, the virtio and 9p modules (in dependency order),
# and an init that mounts this machine's root and runs /mnt/run.sh in it.
cp /bin/busybox "$work/initrd/bin/"
order=(drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev
       drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs
       fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p)
for m in "${order[@]}"; do
  f=$(ls "$modules/$m".ko* 2>/dev/null | head -1)
  [[ -n $f ]] || continue  # built into this kernel
  case $f in
    *.xz) xz -dc "$f" > "$work/initrd/mods/$(basename "$m").ko" ;;
    *.zst) zstd -qdc "$f" > "$work/initrd/mods/$(basename "$m").ko" ;;
    *) cp "$f" "$work/initrd/mods/" ;;
  esac
done
cat > "$work/initrd/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in ${order[*]##*/}; do [ -f /mods/\$m.ko ] && insmod /mods/\$m.ko; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot
for d in tmp run; do mount -t tmpfs tmpfs /newroot/\$d; done
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=512000 out /newroot/mnt
hostname $(hostname)
ip link set lo up
ulimit -Hn 400000
ulimit -Sn 400000
chroot /newroot /bin/bash /mnt/run.sh
sync
poweroff -f
EOF
chmod +x "$work/initrd/init"
(cd "$work/initrd" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > "$work/initrd.gz")

{
  echo 'cd /mnt'
  echo "echo \"idle_vm: guest \$(uname -r), \$(nproc) CPUs, \$(free -m | awk '/Mem:/{print \$2}') MiB, RLIMIT_NOFILE \$(ulimit -Hn)\""
  printf '%q ' "$MINIBENCH" idle "$@"
  echo
  echo 'echo $? > /mnt/rc'
} > "$work/out/run.sh"

echo "idle_vm: booting $(basename "$vmlinuz") under QEMU ($([[ -w /dev/kvm ]] && echo KVM || echo TCG, no KVM))"
accel=tcg,thread=multi
[[ -w /dev/kvm ]] && accel=kvm
qemu-system-x86_64 -machine q35 -cpu max -accel "$accel" -smp "${VM_CPUS:-$(nproc)}" \
  -m "${VM_MEMORY:-12G}" -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1" -nographic -no-reboot \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$work/out,mount_tag=out,security_model=none" </dev/null |
  tr -d '\r' | sed -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e '/SeaBIOS\|iPXE\|Press Ctrl-B\|Booting from\|^\s*$/d'
for f in "$work"/out/*; do
  case $(basename "$f") in run.sh | rc) ;; *) cp "$f" "$caller/" ;; esac
done
[[ -s $work/out/rc ]] || { echo "idle_vm: the guest did not finish" >&2; exit 1; }
exit "$(cat "$work/out/rc")"
