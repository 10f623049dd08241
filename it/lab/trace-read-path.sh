#!/bin/bash
# Traces where an 8 B RDMA READ on rxe0 spends its time, for ib_read_lat and for rdma4j's readAndWait, with the
# kernel's own tracer (tracefs: no perf process competes for the emulated CPUs). Runs inside the lab guest:
#   ./mvnw -B -q install -DskipTests && ./mvnw -B -q -pl it/lab test-compile    (builds what the guest runs)
#   it/lab/rdma-lab.sh run "$PWD/it/lab/trace-read-path.sh"                    (as root, lab set up)
# For each side it records CPU 1 (the measuring CPU, as in VerbsBenchmarkGuestTest) for TRACE_SECONDS of steady
# reads, then prints per READ: how often ksoftirqd/1 was woken and switched to, and the median time of each phase
# of a READ. The raw traces stay in the lab's share directory. Findings: it/lab/verbs-benchmark-log.md.
set -u
TRACE_SECONDS=${TRACE_SECONDS:-0.3}
ROUNDS=${ROUNDS:-2}
LAB=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
OUT=${RDMA_LAB_SHARE:-/tmp}
T=/sys/kernel/tracing
DEV=rxe0 ADDR=10.9.9.1

die() { echo "trace-read-path: $*" >&2; exit 1; }
[ -f "$LAB/target/lab-test-classpath.txt" ] && [ -d "$LAB/target/test-classes" ] \
  || die "it/lab is not built: run ./mvnw -B -q install -DskipTests && ./mvnw -B -q -pl it/lab test-compile first"
rdma link show "$DEV/1" > /dev/null 2>&1 || die "no $DEV: run this inside the lab (it/lab/rdma-lab.sh run \$PWD/$0)"
JAVA=
for j in /usr/lib/jvm/*/bin/java; do
  if "$j" -XshowSettings:properties -version 2>&1 | grep -Eq 'java.specification.version = (2[5-9]|[3-9][0-9])'; then JAVA=$j; break; fi
done
[ -n "$JAVA" ] || die "no JDK 25 or later under /usr/lib/jvm"
[ -d $T/events ] || mount -t tracefs nodev $T || die "cannot mount tracefs on $T"

EVENTS="sched/sched_switch sched/sched_wakeup sched/sched_waking irq/softirq_raise irq/softirq_entry irq/softirq_exit
        irq/irq_handler_entry raw_syscalls/sys_enter raw_syscalls/sys_exit"
# Only these events are switched on and off: a first version that switched every event subsystem off first
# soft-locked the emulated guest (as perf's tracing of ib_read_lat did, see the log).
start_tracing() {
  echo 0 > $T/tracing_on; echo > $T/trace
  echo 2 > $T/tracing_cpumask                   # CPU 1 only
  echo 4096 > $T/buffer_size_kb
  echo 'id == 1' > $T/events/raw_syscalls/sys_enter/filter   # write() only: the doorbell
  echo 'id == 1' > $T/events/raw_syscalls/sys_exit/filter
  for e in $EVENTS; do echo 1 > $T/events/$e/enable; done
}
stop_tracing() {
  echo 0 > $T/tracing_on
  for e in $EVENTS; do echo 0 > $T/events/$e/enable; done
}
capture() { # file
  echo > $T/trace; echo 1 > $T/tracing_on; sleep "$TRACE_SECONDS"; echo 0 > $T/tracing_on
  cat $T/trace > "$1"
}

# One line per READ (a write() that raised the tasklet softirq) of the measured task, then a summary. The phases are
# timed on READs with the common sequence only (the tasklet woke ksoftirqd/1, which then preempted the caller).
analyse() { # file label
  awk -v label="$2" '
    # called at the next doorbell: the segment collected since the previous one ends at "next"
    function flush(next_ts,   i, seq) {
      if (n == 0 || !raise) return
      reads++; if (wake) woken++; if (sw) preempted++; if (quiet) quietwakes++
      printf "0 whole READ, doorbell to next doorbell %.1f\n", (next_ts - t[1]) * 1e6
      seq = ""; for (i = 1; i <= n; i++) seq = seq " " kind[i]
      if (seq != " sys_enter softirq_raise sched_waking sched_wakeup softirq_entry softirq_exit sys_exit sched_switch sched_switch") return
      printf "1 doorbell to tasklet raised %.1f\n", (t[2] - t[1]) * 1e6
      printf "2 raised to tasklet run %.1f\n", (t[5] - t[2]) * 1e6
      printf "3 tasklet %.1f\n", (t[6] - t[5]) * 1e6
      printf "4 tasklet to write() return %.1f\n", (t[7] - t[6]) * 1e6
      printf "5 write() return to switch %.1f\n", (t[8] - t[7]) * 1e6
      printf "6 in ksoftirqd %.1f\n", (t[9] - t[8]) * 1e6
      printf "7 back in user space to next doorbell %.1f\n", (next_ts - t[9]) * 1e6
    }
    /^#/ { next }
    {
      comm = $1; sub(/-[0-9]+$/, "", comm)
      for (f = 2; f <= NF; f++) if ($f ~ /^[0-9]+\.[0-9]+:$/) break
      ts = substr($f, 1, length($f) - 1) + 0; ev = $(f + 1); sub(/:$/, "", ev); flags = $(f - 1)
      if (ev == "sys_enter" && comm !~ /^ksoftirqd/) {
        flush(ts)
        n = 0; raise = 0; wake = 0; sw = 0; quiet = 0; started = 1
      }
      if (!started) next
      kind[++n] = ev; t[n] = ts
      if (ev == "softirq_raise" && $0 ~ /TASKLET/) raise = 1
      if (ev == "sched_wakeup" && $0 ~ /comm=ksoftirqd\/1 /) { wake = 1; if (flags !~ /N/) quiet = 1 }
      if (ev == "sched_switch" && $0 ~ /next_comm=ksoftirqd\/1 /) sw = 1
    }
    END { printf "summary %s: %d READs; ksoftirqd/1 woken in %d, switched to in %d; %d wake-ups did not preempt\n", label, reads, woken, preempted, quietwakes }
  ' "$1" > "$1.rows"
  grep '^summary' "$1.rows" | cut -c9-
  grep -v '^summary' "$1.rows" | awk '{v = $NF; sub(/ [^ ]*$/, ""); print $0 "\t" v}' | sort -t"$(printf '\t')" -k1,1 -k2,2n \
    | awk -F'\t' '{ k[$1] = k[$1] " " $2; c[$1]++ }
        END { for (x in k) {
                split(substr(k[x], 2), a, " "); lo = int(c[x] / 10) + 1; hi = c[x] - int(c[x] / 10); sum = 0
                for (i = lo; i <= hi; i++) sum += a[i]
                printf "  %-42s median %5.1f us, 10-90 %% trimmed mean %5.1f us (%d READs)\n", x, a[int(c[x] / 2) + 1], sum / (hi - lo + 1), c[x]
              } }' \
    | sort
}

start_tracing
for r in $(seq 1 "$ROUNDS"); do
  # C: ib_read_lat client on CPU 1, server on CPU 0, as VerbsBenchmarkGuestTest runs them; long enough to trace mid-run
  timeout 120 taskset -c 0 ib_read_lat -d $DEV -F -p 18700 -s 8 -n 300000 > "$OUT/c-server.log" 2>&1 &
  sleep 2
  timeout 120 taskset -c 1 ib_read_lat -d $DEV -F -p 18700 -s 8 -n 300000 $ADDR > "$OUT/c-client.log" 2>&1 &
  sleep 4
  capture "$OUT/trace-c-$r.txt"
  wait
  analyse "$OUT/trace-c-$r.txt" "ib_read_lat round $r"

  # Java: VerbsReadBenchmark warms readAndWait up as for its latency measurement, then keeps reading
  taskset -c 0 "$JAVA" --enable-native-access=ALL-UNNAMED -XX:-TieredCompilation -Drdma4j.bench.cpu=1 \
      -cp "$LAB/target/test-classes:$LAB/target/classes:$(cat "$LAB/target/lab-test-classpath.txt")" \
      io.rdma4j.it.lab.VerbsReadBenchmark $DEV $ADDR rxe false trace > "$OUT/java-$r.log" 2>&1 &
  java_pid=$!
  for _ in $(seq 1 600); do grep -q '^TRACE-WINDOW' "$OUT/java-$r.log" && break; kill -0 $java_pid 2> /dev/null || break; sleep 1; done
  grep -q '^TRACE-WINDOW' "$OUT/java-$r.log" || { cat "$OUT/java-$r.log"; die "the Java side did not reach its trace window"; }
  sleep 1
  capture "$OUT/trace-java-$r.txt"
  wait $java_pid
  grep '^TRACE-WINDOW' "$OUT/java-$r.log"
  analyse "$OUT/trace-java-$r.txt" "readAndWait round $r"
done
stop_tracing
