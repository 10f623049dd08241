#!/bin/sh
# /init of the lab's initramfs (busybox): mount the host "/" (9p, read-only) under a tmpfs overlay,
# then hand over to guest-init.sh, whose host path rdma-lab.sh passes as rdmalab.init=.
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
poweroff_now() { echo "LAB: $1"; echo o > /proc/sysrq-trigger; sleep 10; }
for m in $(cat /modules/order); do insmod "/modules/$m.ko" || echo "LAB: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower \
  || poweroff_now "mounting the host root over 9p failed"
mount -t tmpfs -o size=2g tmpfs /rw; mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot \
  || poweroff_now "mounting the overlay root failed"
GINIT=
for a in $(cat /proc/cmdline); do case "$a" in rdmalab.init=*) GINIT="${a#rdmalab.init=}";; esac; done
[ -n "$GINIT" ] || poweroff_now "no rdmalab.init= on the kernel command line"
umount /proc /sys; mount --move /dev /newroot/dev
exec switch_root /newroot "$GINIT"
