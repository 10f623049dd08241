#!/usr/bin/env bash
# rdma4j soft-RDMA lab: real RDMA devices without RDMA hardware.
#
# A QEMU (TCG) virtual machine boots Debian's own kernel and brings up two software RDMA devices:
#   rxe0  Soft-RoCE (RoCE v2) on dummy netdev rdma0, 10.9.9.1/24
#   siw0  soft-iWARP           on dummy netdev rdma1, 10.9.10.1/24
# The guest root is the host "/" shared read-only over virtio-9p under a tmpfs overlay, so the host's
# JDK, rdma-core tools and the project's built classes are visible in the guest at the same paths.
#
#   it/lab/rdma-lab.sh setup               one-time, idempotent (root: installs apt packages)
#   it/lab/rdma-lab.sh ensure              setup when status says the lab is not ready (what the build calls)
#   it/lab/rdma-lab.sh ensure-host         installs the packages the host tests need when any is missing
#   it/lab/rdma-lab.sh status              exit 0 when the lab can run, else 1 with the reason
#   it/lab/rdma-lab.sh run /abs/script.sh  boot, run the script as root in the guest, exit with its rc
#   it/lab/rdma-lab.sh shell               boot to an interactive guest shell (serial console)
#
# Environment:
#   RDMA_LAB_DIR      lab cache directory (default <repo>/.lab)
#   RDMA_LAB_SHARE    host directory mounted read-write in the guest at the same path, exported to the
#                     guest script as $RDMA_LAB_SHARE (default: a new directory under $RDMA_LAB_DIR/runs)
#   RDMA_LAB_TIMEOUT  seconds before a boot is killed (default 1200)
#   RDMA_LAB_BOOT_TIMEOUT  seconds the guest has to bring its devices up (guest-init's "ready") before the boot is
#                     killed as hung (default 90; a normal boot is ready in 7–25 s)
#   RDMA_LAB_VM_MEM / RDMA_LAB_VM_CPUS   guest size (default 4G / 2)
#
# setup, ensure, ensure-host, run and shell need root: run by another user, they go through `sudo -n`
# (never a password prompt: the build calls them) and otherwise fail naming the command to run as root.
#
# Facts behind the choices (measured on Debian 12 hosts without RDMA hardware):
# - KVM is unusable there, so QEMU runs in TCG; booting the uncompressed vmlinux through the PVH entry
#   skips the slow in-guest decompressor.
# - Debian's generic kernel ships rdma_rxe.ko but not siw.ko (CONFIG_RDMA_SIW unset); siw builds out of
#   tree from Debian's linux-source against the matching linux-headers, and the kernel accepts it unsigned.
# - 9p with security_model=none and modprobe in the guest need root.
# - A TCG guest marks its TSC unstable ("TSCs unsynchronized") and falls back to the HPET clocksource, so every
#   clock_gettime becomes a system call plus an emulated device read (0.9-1.4 us measured). Under TCG the TSC is
#   the host's clock, the same on every vCPU: the guest boots with tsc=reliable and reads the time in the vDSO
#   as a real host does (0.4 us). Timing code (System.nanoTime) otherwise paid the emulator's clock, while
#   perftest reads the TSC itself either way.
set -euo pipefail

LAB_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$LAB_SCRIPT_DIR/../.." && pwd)
LAB_DIR=${RDMA_LAB_DIR:-$REPO_ROOT/.lab}
# Bump when setup's output changes incompatibly: status then asks for setup again.
LAB_FORMAT=1
VM_MEM=${RDMA_LAB_VM_MEM:-4G}
VM_CPUS=${RDMA_LAB_VM_CPUS:-2}
RUN_TIMEOUT=${RDMA_LAB_TIMEOUT:-1200}
BOOT_TIMEOUT=${RDMA_LAB_BOOT_TIMEOUT:-90}

# What the host tests outside the lab use: libibverbs/librdmacm with the providers, their headers and gcc
# (rdma-native-loader compares the generated layouts with gcc's).
TEST_HOST_PACKAGES=(rdma-core ibverbs-providers libibverbs1 librdmacm1 libibverbs-dev librdmacm-dev gcc libc6-dev)
HOST_PACKAGES=("${TEST_HOST_PACKAGES[@]}" qemu-system-x86 ibverbs-utils ibverbs-providers perftest rdmacm-utils
  libibverbs-dev librdmacm-dev iproute2 busybox-static kmod cpio xz-utils gzip bc make libc6-dev
  binutils coreutils util-linux)
# Commands `run` and the guest rely on, with the package that provides each.
REQUIRED_COMMANDS=(qemu-system-x86_64 ibv_devinfo rdma ib_read_lat rping busybox cpio depmod xz taskset)

log() { printf '[rdma-lab %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
can_sudo() { command -v sudo > /dev/null && sudo -n true 2> /dev/null; }

# Runs the rest of this command as root: directly when root, else again through `sudo -n` with the lab's
# environment; without either it fails with `$2`, the command a person has to run once.
need_root() {
  [ "$(id -u)" = 0 ] && return 0
  if can_sudo; then
    exec sudo -n env RDMA_LAB_DIR="$LAB_DIR" RDMA_LAB_TIMEOUT="$RUN_TIMEOUT" RDMA_LAB_BOOT_TIMEOUT="$BOOT_TIMEOUT" RDMA_LAB_VM_MEM="$VM_MEM" \
      RDMA_LAB_VM_CPUS="$VM_CPUS" ${RDMA_LAB_SHARE:+RDMA_LAB_SHARE="$RDMA_LAB_SHARE"} \
      "$LAB_SCRIPT_DIR/rdma-lab.sh" "${ARGS[@]}"
  fi
  die "'$1' needs root (apt-get, 9p security_model=none, modprobe in the guest) and 'sudo -n' is not available here; run as root: ${2:-sudo $LAB_SCRIPT_DIR/rdma-lab.sh ${ARGS[*]}}"
}

# apt-get with a lock wait and one retry: brand-new CI machines see transient mirror errors.
apt_retry() {
  local attempt
  for attempt in 1 2; do
    if DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -q -o DPkg::Lock::Timeout=300 \
        -o Acquire::Retries=3 "$@"; then
      return 0
    fi
    log "apt-get $1 failed (attempt $attempt of 2)"
    if [ "$attempt" = 1 ]; then sleep 5; timeout 300 apt-get -q update || true; fi
  done
  return 1
}

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

install_packages() {
  local missing
  missing=$(missing_packages "$@" | tr '\n' ' ')
  if [ -z "${missing// /}" ]; then
    log "packages already installed: $*"
    return 0
  fi
  log "installing: $missing"
  if [ ! -f "$LAB_DIR/.apt-updated" ]; then
    apt_retry update && touch "$LAB_DIR/.apt-updated"
  fi
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  apt_retry install -y --no-install-recommends $missing
}

step_done() { [ -f "$LAB_DIR/stamps/$1" ]; }
mark_done() { mkdir -p "$LAB_DIR/stamps"; date -Is > "$LAB_DIR/stamps/$1"; }

# The kernel: Debian's generic flavour (the -cloud flavour lacks rdma_rxe), pinned once per lab dir.
fetch_kernel() {
  if step_done kernel; then log "kernel: cached ($(cat "$LAB_DIR/kver"))"; return 0; fi
  [ -f "$LAB_DIR/.apt-updated" ] || { apt_retry update && touch "$LAB_DIR/.apt-updated"; }
  local kpkg kver off
  kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2}' | sed -n 1p)
  [ -n "$kpkg" ] || die "cannot resolve the kernel package from 'apt-cache depends linux-image-amd64'"
  kver=${kpkg#linux-image-}
  log "kernel: downloading $kpkg"
  rm -rf "$LAB_DIR/dl" "$LAB_DIR/k" && mkdir -p "$LAB_DIR/dl" "$LAB_DIR/k"
  (cd "$LAB_DIR/dl" && apt_retry download "$kpkg")
  dpkg-deb -f "$LAB_DIR"/dl/"${kpkg}"_*.deb Version > "$LAB_DIR/kpkg-version"
  dpkg -x "$LAB_DIR"/dl/"${kpkg}"_*.deb "$LAB_DIR/k"
  # vmlinuz is a bzImage with an xz payload: cut the payload out at the xz magic and decompress it
  # once here, so QEMU boots the ELF vmlinux through its PVH entry.
  off=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ' "$LAB_DIR/k/boot/vmlinuz-$kver" | cut -d: -f1 | sed -n 1p)
  [ -n "$off" ] || die "no xz payload found in vmlinuz-$kver"
  # tail gets SIGPIPE once xz stops after the first stream: that is expected.
  (set +o pipefail; tail -c +$((off + 1)) "$LAB_DIR/k/boot/vmlinuz-$kver" | xz -dc --single-stream > "$LAB_DIR/vmlinux.tmp")
  [ "$(stat -c %s "$LAB_DIR/vmlinux.tmp")" -gt 10000000 ] || die "extracted vmlinux is too small"
  mv "$LAB_DIR/vmlinux.tmp" "$LAB_DIR/vmlinux"
  echo "$kver" > "$LAB_DIR/kver"
  rm -f "$LAB_DIR/stamps/siw" "$LAB_DIR/stamps/initramfs"
  mark_done kernel
}

# The version of $1 to take for a kernel at Debian version $2: that one if the archive has it, else the newest of
# the same upstream release. The security archive sometimes serves a kernel's source and kbuild only at a later
# Debian revision (6.1.192-3 beside the image's 6.1.192-2); their sources and build tools are the same release.
same_upstream() {
  local versions v
  versions=$(apt-cache madison "$1" | awk -F'|' '{gsub(/ /, "", $2); print $2}')
  if printf '%s\n' "$versions" | grep -qxF "$2"; then echo "$2"; return 0; fi
  v=$(printf '%s\n' "$versions" | grep -F "${2%-*}-" | sort -V | tail -n 1)
  [ -n "$v" ] || die "the archive has no $1 of kernel release ${2%-*} (wanted $2; it has: $(echo $versions))"
  log "$1: $2 is not served; taking $v of the same release"
  echo "$v"
}

# soft-iWARP: build siw.ko from Debian's linux-source (only drivers/infiniband/sw/siw) against the
# matching Debian headers, with the compiler the kernel was built with.
build_siw() {
  local kver kpkg sver kbase series gcc d
  kver=$(cat "$LAB_DIR/kver"); kpkg=linux-image-$kver
  if step_done siw && [ -f "$LAB_DIR/k/lib/modules/$kver/updates/siw.ko" ]; then log "siw.ko: cached"; return 0; fi
  sver=$(cat "$LAB_DIR/kpkg-version")       # e.g. 6.1.158-1
  kbase=${kver%-amd64}                        # e.g. 6.1.0-41
  series=$(echo "$sver" | cut -d. -f1,2)      # e.g. 6.1
  gcc=$(grep -m1 -o 'gcc-[0-9]*' "$LAB_DIR/k/boot/config-$kver" | sed -n 1p)
  [ -n "$gcc" ] || die "cannot tell the kernel's compiler from config-$kver"
  install_packages "$gcc"
  local kbuild_ver source_ver
  kbuild_ver=$(same_upstream "linux-kbuild-$series" "$sver") || exit 1
  source_ver=$(same_upstream "linux-source-$series" "$sver") || exit 1
  log "siw.ko: downloading linux-source-$series $source_ver, headers $sver and kbuild $kbuild_ver"
  (cd "$LAB_DIR/dl" && apt_retry download "linux-source-$series=$source_ver" "linux-headers-$kver=$sver" \
      "linux-headers-$kbase-common=$sver" "linux-kbuild-$series=$kbuild_ver")
  rm -rf "$LAB_DIR/hdr" "$LAB_DIR/src" "$LAB_DIR/siw" && mkdir -p "$LAB_DIR/hdr" "$LAB_DIR/src" "$LAB_DIR/siw"
  for d in "linux-headers-${kver}_$sver" "linux-headers-$kbase-common_$sver" "linux-kbuild-${series}_$kbuild_ver"; do
    dpkg -x "$LAB_DIR"/dl/"${d}"_*.deb "$LAB_DIR/hdr"
  done
  # The headers package includes its -common sibling from /usr/src: point it at the extracted copy.
  sed -i "s#include /usr/src/#include $LAB_DIR/hdr/usr/src/#" "$LAB_DIR/hdr/usr/src/linux-headers-$kver/Makefile"
  dpkg -x "$LAB_DIR/dl/linux-source-${series}_${source_ver}_all.deb" "$LAB_DIR/src"
  tar -xJf "$LAB_DIR/src/usr/src/linux-source-$series.tar.xz" -C "$LAB_DIR/src" \
      "linux-source-$series/drivers/infiniband/sw/siw"
  cp "$LAB_DIR/src/linux-source-$series/drivers/infiniband/sw/siw/"* "$LAB_DIR/siw/"
  printf 'obj-m := siw.o\nsiw-y := siw_cm.o siw_cq.o siw_main.o siw_mem.o siw_qp.o siw_qp_tx.o siw_qp_rx.o siw_verbs.o\n' \
      > "$LAB_DIR/siw/Kbuild"
  log "siw.ko: compiling"
  timeout 900 make -s -C "$LAB_DIR/hdr/usr/src/linux-headers-$kver" M="$LAB_DIR/siw" -j"$(nproc)" modules
  mkdir -p "$LAB_DIR/k/lib/modules/$kver/updates"
  strip --strip-debug -o "$LAB_DIR/k/lib/modules/$kver/updates/siw.ko" "$LAB_DIR/siw/siw.ko"
  # The sources are only needed for the build: keep the lab dir small.
  rm -rf "$LAB_DIR/src" "$LAB_DIR"/dl/linux-source-*.deb
  depmod -b "$LAB_DIR/k" "$kver"
  rm -f "$LAB_DIR/stamps/initramfs"
  mark_done siw
}

# initramfs: busybox plus the modules that mount the 9p root and the overlay; it then switches to
# guest-init.sh (from this directory, read through the 9p root).
build_initramfs() {
  local kver dir m
  kver=$(cat "$LAB_DIR/kver")
  if step_done initramfs && [ -f "$LAB_DIR/initramfs.cpio.gz" ]; then log "initramfs: cached"; return 0; fi
  depmod -b "$LAB_DIR/k" "$kver"
  dir=$LAB_DIR/initramfs
  rm -rf "$dir" && mkdir -p "$dir"/{bin,proc,sys,dev,lower,rw,newroot,modules}
  cp /bin/busybox "$dir/bin/"
  for m in sh mount umount insmod mkdir switch_root sleep cat echo; do ln -sf busybox "$dir/bin/$m"; done
  : > "$dir/modules/order"
  for m in $(for x in virtio_pci 9pnet_virtio 9p overlay; do
               modprobe -d "$LAB_DIR/k" -S "$kver" --show-depends "$x"; done | awk '$1=="insmod"{print $2}' | awk '!s[$0]++'); do
    cp "$m" "$dir/modules/" && basename "$m" .ko >> "$dir/modules/order"
  done
  install -m 0755 "$LAB_SCRIPT_DIR/initramfs-init.sh" "$dir/init"
  (cd "$dir" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > "$LAB_DIR/initramfs.cpio.gz.tmp")
  mv "$LAB_DIR/initramfs.cpio.gz.tmp" "$LAB_DIR/initramfs.cpio.gz"
  mark_done initramfs
}

cmd_setup() {
  need_root setup
  local start=$SECONDS
  mkdir -p "$LAB_DIR"
  log "setting up the soft-RDMA lab in $LAB_DIR"
  install_packages "${HOST_PACKAGES[@]}"
  fetch_kernel
  build_siw
  build_initramfs
  echo "$LAB_FORMAT" > "$LAB_DIR/ready"
  log "setup done in $((SECONDS - start)) s: kernel $(cat "$LAB_DIR/kver") ($(cat "$LAB_DIR/kpkg-version"))"
  echo "$(date -Is) setup $((SECONDS - start)) s" >> "$LAB_DIR/timings.log"
}

# Prints why the lab cannot run, or nothing when it can.
lab_problem() {
  local c kver
  [ -f "$LAB_DIR/ready" ] || { echo "no completed setup in $LAB_DIR"; return; }
  [ "$(cat "$LAB_DIR/ready")" = "$LAB_FORMAT" ] || { echo "lab in $LAB_DIR was set up by an older rdma-lab.sh"; return; }
  kver=$(cat "$LAB_DIR/kver")
  for c in vmlinux initramfs.cpio.gz "k/lib/modules/$kver/updates/siw.ko"; do
    [ -s "$LAB_DIR/$c" ] || { echo "$LAB_DIR/$c is missing"; return; }
  done
  find "$LAB_DIR/k/lib/modules/$kver" -name 'rdma_rxe.ko*' | grep -q . || { echo "rdma_rxe module missing"; return; }
  for c in "${REQUIRED_COMMANDS[@]}"; do
    command -v "$c" > /dev/null || { echo "command '$c' not found"; return; }
  done
}

# Sets the lab up unless it is ready: the build's lab tests call this, so a new machine needs no separate step.
cmd_ensure() {
  local problem
  problem=$(lab_problem)
  if [ -z "$problem" ]; then
    log "lab ready in $LAB_DIR"
    return 0
  fi
  log "lab not ready ($problem): setting it up"
  need_root ensure "sudo ${RDMA_LAB_DIR:+RDMA_LAB_DIR=$LAB_DIR }$LAB_SCRIPT_DIR/rdma-lab.sh setup"
  cmd_setup
}

# Installs what the host tests need when a package is missing; silent and root-free when nothing is.
cmd_ensure_host() {
  local missing
  if ! command -v dpkg-query > /dev/null; then
    log "not a Debian-based host: install libibverbs, librdmacm, their headers and gcc with the system's package manager"
    return 0
  fi
  missing=$(missing_packages "${TEST_HOST_PACKAGES[@]}" | tr '\n' ' ')
  [ -n "${missing// /}" ] || return 0
  log "the host tests need: $missing"
  need_root ensure-host "sudo apt-get install $missing"
  mkdir -p "$LAB_DIR"
  install_packages "${TEST_HOST_PACKAGES[@]}"
}

cmd_status() {
  local problem
  problem=$(lab_problem)
  if [ -n "$problem" ]; then
    echo "soft-RDMA lab not ready: $problem (run it/lab/rdma-lab.sh setup as root)"
    return 1
  fi
  if [ "$(id -u)" != 0 ] && ! can_sudo; then
    echo "soft-RDMA lab set up in $LAB_DIR, but 'run' needs root and 'sudo -n' is not available"
    return 1
  fi
  echo "soft-RDMA lab ready in $LAB_DIR (kernel $(cat "$LAB_DIR/kver"))"
}

# Boots the VM; with a script, runs it in the guest and exits with its exit status.
boot() {
  local script=${1:-} share problem start rc qemu watchdog
  problem=$(lab_problem)
  [ -z "$problem" ] || die "soft-RDMA lab not ready: $problem (run it/lab/rdma-lab.sh setup as root)"
  if [ -n "$script" ]; then
    case "$script" in /*) ;; *) script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script") ;; esac
    [ -x "$script" ] || die "guest script $script is not an executable file"
  fi
  share=${RDMA_LAB_SHARE:-$LAB_DIR/runs/$(date +%Y%m%d-%H%M%S)-$$}
  mkdir -p "$share"; share=$(cd "$share" && pwd)
  # Kernel command-line values are split at spaces.
  case "$LAB_DIR$share$script$LAB_SCRIPT_DIR" in *[[:space:]]*) die "lab paths must not contain spaces" ;; esac
  rm -f "$share/.rdma-lab-rc" "$share/.rdma-lab-ready" "$share/.rdma-lab-hung"
  log "booting the guest (TCG, $VM_CPUS vCPUs, $VM_MEM, timeout ${RUN_TIMEOUT}s); share: $share"
  start=$SECONDS
  set +e
  timeout -k 10 "$RUN_TIMEOUT" qemu-system-x86_64 \
    -accel tcg,thread=multi,tb-size=512 -cpu max -smp "$VM_CPUS" -m "$VM_MEM" \
    -nographic -no-reboot -nodefaults -serial stdio \
    -kernel "$LAB_DIR/vmlinux" -initrd "$LAB_DIR/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=4 tsc=reliable rdmalab.init=$LAB_SCRIPT_DIR/guest-init.sh rdmalab.dir=$LAB_DIR rdmalab.share=$share rdmalab.run=$script" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$share",mount_tag=labshare,security_model=none,multidevs=remap <&0 &
  qemu=$! # (<&0: a background job of a script would read /dev/null; the shell command's console needs stdin)
  # A TCG boot has been seen to hang before guest-init (no output for an hour): stop it early so the caller can
  # boot again. guest-init writes .rdma-lab-ready once the devices are up.
  (
    for ((waited = 0; waited < BOOT_TIMEOUT; waited++)); do
      { [ -f "$share/.rdma-lab-ready" ] || ! kill -0 "$qemu" 2> /dev/null; } && exit 0
      sleep 1
    done
    touch "$share/.rdma-lab-hung"
    kill "$qemu" 2> /dev/null
  ) &
  watchdog=$!
  wait "$qemu"
  rc=$?
  kill "$watchdog" 2> /dev/null || true
  wait "$watchdog" 2> /dev/null || true
  set -e
  log "guest finished after $((SECONDS - start)) s (qemu rc=$rc)"
  echo "$(date -Is) boot $((SECONDS - start)) s ${script:-shell}" >> "$LAB_DIR/timings.log" 2>/dev/null || true
  [ -f "$share/.rdma-lab-hung" ] && die "guest did not bring its devices up within ${BOOT_TIMEOUT}s (RDMA_LAB_BOOT_TIMEOUT): the boot hung; see the console output above"
  [ "$rc" = 124 ] && die "guest did not finish within ${RUN_TIMEOUT}s (RDMA_LAB_TIMEOUT)"
  [ -f "$share/.rdma-lab-rc" ] || die "guest wrote no exit status (qemu rc=$rc): see the console output above"
  rc=$(cat "$share/.rdma-lab-rc")
  log "guest script exit status: $rc"
  exit "$rc"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

ARGS=("$@")
case "${1:-}" in
  setup) cmd_setup ;;
  ensure) cmd_ensure ;;
  ensure-host) cmd_ensure_host ;;
  status) cmd_status ;;
  run) [ $# = 2 ] || { usage >&2; exit 2; }; need_root run; boot "$2" ;;
  shell) need_root shell; boot "" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
