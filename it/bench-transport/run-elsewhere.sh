#!/bin/bash
# The tcp provider's benchmarks on a machine with no JDK and no Maven (a lent many-core machine).
#
#   it/bench-transport/run-elsewhere.sh pack DIR   here: a jlink'd JDK (43 MiB), the jars and the benchmark classes
#                                                  in DIR, and this script; build first with
#                                                  ./mvnw -B install -DskipTests -pl it/bench-transport -am
#   DIR/run-elsewhere.sh run OUT [JAVA_OPTION...]  there: TransportBenchmark three times, PairedProbe, then
#                                                  TcpTlsCostBenchmark, each table appended to OUT/tables.txt as
#                                                  it is printed; a step that would end after LIMIT seconds
#                                                  (default 560) is skipped and said so in OUT/machine.txt
#
# -Dbench.warmups=1 -Dbench.measurements=1 as JAVA_OPTIONs checks a pack in about 3 minutes on 2 cores.
set -eu
case "${1:-}" in
pack)
  dir=$2
  module=$(cd "$(dirname "$0")" && pwd)
  java_home=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}
  rm -rf "$dir" && mkdir -p "$dir/lib"
  "$java_home/bin/jlink" --add-modules java.base,java.logging,java.management,jdk.management,jdk.unsupported \
      --strip-debug --no-man-pages --no-header-files --compress=zip-9 --output "$dir/jdk"
  (cd "$module/../.." && ./mvnw -B -q -o dependency:build-classpath -Dmdep.includeScope=test \
      -Dmdep.outputFile="$dir/classpath.txt" -pl it/bench-transport)
  # JUnit and AssertJ only serve the @Test entry points; main() needs neither.
  tr ':' '\n' < "$dir/classpath.txt" | grep -v -e junit -e opentest4j -e apiguardian -e jspecify -e assertj -e byte-buddy \
      | xargs -I{} cp {} "$dir/lib/"
  rm "$dir/classpath.txt"
  cp -r "$module/target/test-classes" "$dir/classes"
  cp "$0" "$dir/"
  du -sh "$dir"
  ;;
run)
  here=$(cd "$(dirname "$0")" && pwd)
  out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2
  java=$here/jdk/bin/java
  cp=$here/classes:$(ls "$here"/lib/*.jar | tr '\n' ':')
  work=$(mktemp -d) && cd "$work"
  start=$(date +%s)
  { echo "cores $(nproc)"; uptime; grep -m1 "model name" /proc/cpuinfo; "$java" -version 2>&1; } | tee "$out/machine.txt"
  step() { # name main-class seconds-it-needs [java options]
    local name=$1 main=$2 needs=$3; shift 3
    local left=$(( ${LIMIT:-560} - ($(date +%s) - start) ))
    if [ "$left" -lt "$needs" ]; then echo "skipped $name: $left s left" | tee -a "$out/machine.txt"; return; fi
    local t0=$(date +%s) rc=0
    "$java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow "$@" -cp "$cp" "$main" \
        > "$work/$name.log" 2>&1 || rc=$?
    echo "$name rc=$rc $(( $(date +%s) - t0 )) s" | tee -a "$out/machine.txt"
    cat target/*.txt 2>/dev/null | tee -a "$out/tables.txt" || true
    rm -f target/*.txt
  }
  for i in 1 2 3; do step "transport-$i" io.rdma4j.it.bench.TransportBenchmark 150 "$@"; done
  step probe io.rdma4j.it.bench.PairedProbe 70 "$@"
  step tls io.rdma4j.it.bench.TcpTlsCostBenchmark 90 "$@"
  tail -n 40 "$work"/*.log > "$out/logs-tail.txt" 2>/dev/null || true
  ;;
*)
  sed -n '2,13p' "$0"; exit 2
  ;;
esac
