#!/bin/bash
# PID 1 of the lab guest (root = overlay of a tmpfs over the host "/"). Brings up the soft-RDMA
# devices, runs the guest script given as rdmalab.run= and powers off; the script's exit status goes to
# <share>/.rdma-lab-rc, which rdma-lab.sh on the host turns into its own exit status.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc; mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm; mount -t tmpfs tmpfs /run
hostname rdmalab
RUN= LAB_DIR= SHARE=
for a in $(cat /proc/cmdline); do
  case "$a" in
    rdmalab.run=*) RUN="${a#rdmalab.run=}" ;;
    rdmalab.dir=*) LAB_DIR="${a#rdmalab.dir=}" ;;
    rdmalab.share=*) SHARE="${a#rdmalab.share=}" ;;
  esac
done
poweroff_now() { sync; echo o > /proc/sysrq-trigger; sleep 10; }
# Read-write share for results, at the same path as on the host.
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 labshare "$SHARE" || { echo "LAB: share mount failed"; poweroff_now; }
finish() { echo "$1" > "$SHARE/.rdma-lab-rc"; poweroff_now; }
# The guest kernel's modules (rdma_rxe from Debian, siw built by setup) instead of the host's.
mkdir -p /lib/modules && mount --bind "$LAB_DIR/k/lib/modules" /lib/modules
ulimit -l unlimited; ulimit -n 65536
ip link set lo up

device_failed() { echo "LAB: $1"; finish 98; }
modprobe dummy numdummies=0 || device_failed "modprobe dummy failed"
modprobe ib_uverbs && modprobe rdma_ucm && modprobe rdma_rxe || device_failed "loading rdma modules failed"
# Each netdev has a second address (LabDevice.secondAddress): a second host on the same device.
ip link add rdma0 type dummy && ip link set rdma0 up && ip addr add 10.9.9.1/24 dev rdma0 \
  && ip addr add 10.9.9.2/24 dev rdma0 && rdma link add rxe0 type rxe netdev rdma0 || device_failed "creating rxe0 failed"
modprobe siw || device_failed "modprobe siw failed"
ip link add rdma1 type dummy && ip link set rdma1 up && ip addr add 10.9.10.1/24 dev rdma1 \
  && ip addr add 10.9.10.2/24 dev rdma1 && rdma link add siw0 type siw netdev rdma1 || device_failed "creating siw0 failed"
echo "LAB: rxe0 on rdma0 (10.9.9.1, .2), siw0 on rdma1 (10.9.10.1, .2), ready at $(cut -d' ' -f1 /proc/uptime) s guest uptime"
touch "$SHARE/.rdma-lab-ready" # rdma-lab.sh's boot watchdog stops waiting

if [ -n "$RUN" ]; then
  cd /tmp
  RDMA_LAB_SHARE=$SHARE "$RUN"; rc=$?
  echo "LAB: $RUN exited with status $rc"
  finish "$rc"
else
  echo "LAB: interactive shell; 'exit' powers the guest off"
  RDMA_LAB_SHARE=$SHARE setsid -c /bin/bash -l </dev/ttyS0 >/dev/ttyS0 2>&1
  finish 0
fi
