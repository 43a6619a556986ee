#!/usr/bin/env bash
# The issue-15 benchmarks in one run, printed as one table: the disk's raw
# write+fsync rate, appends/s of store/local and store/jetstream (1 node,
# 3 nodes, sync-always), turn latency through the daemon on each store,
# and recovery of AGENTS x EVENTS from JetStream. The load average is
# printed beside the figures (the machine may be shared).
#
#   scripts/bench-cluster.sh                 # recovery of 1,000 x 1,000 (minutes)
#   AGENTS=100 EVENTS=100 scripts/bench-cluster.sh   # a quick run
#   APPENDS=2000 TURNS=300 scripts/bench-cluster.sh  # iterations (defaults)
#   R3=1 scripts/bench-cluster.sh            # recovery from three servers too (fills for minutes)
#   LEASES=1000,10000 scripts/bench-cluster.sh       # lease CPU, and a recovered core's, at rest (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
agents="${AGENTS:-1000}"
events="${EVENTS:-1000}"
appends="${APPENDS:-2000}"
turns="${TURNS:-300}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load average at start: $(load)   ($(nproc) cores, $(date -u +%FT%TZ))"
go test -run '^$' -bench 'RawWriteFsync$' -benchtime "${appends}x" ./eventlog/ >"$tmp/raw" 2>&1 || { cat "$tmp/raw"; exit 1; }
go test -run '^$' -bench 'Append$' -benchtime "${appends}x" -timeout 30m ./store/jetstream/ >"$tmp/append" 2>&1 || { cat "$tmp/append"; exit 1; }
go test -run '^$' -bench 'StoreTurn$' -benchtime "${turns}x" -timeout 30m ./engine/ >"$tmp/turn" 2>&1 || { cat "$tmp/turn"; exit 1; }
WARREN_BENCH_JS_AGENTS="$agents" WARREN_BENCH_JS_EVENTS="$events" WARREN_BENCH_JS_R3="${R3:-0}" \
  go test -run '^$' -bench 'RecoveryJetStream$' -benchtime 1x -timeout 2h -v ./engine/ >"$tmp/recovery" 2>&1 || { cat "$tmp/recovery"; exit 1; }
# -bench takes one pattern per level of sub-benchmarks: the daemon's way
# on R1 and R3, then a key per agent (as before) on R1 only (10,000 keys
# on R3 take more than 15 minutes to claim).
WARREN_BENCH_LEASES="${LEASES:-1000}" \
  go test -run '^$' -bench 'LeasesAtRest/R[13]/daemon' -benchtime 1x -timeout 2h ./store/jetstream/ >"$tmp/leases" 2>&1 || { cat "$tmp/leases"; exit 1; }
WARREN_BENCH_LEASES="${LEASES:-1000}" \
  go test -run '^$' -bench 'LeasesAtRest/R1/keys' -benchtime 1x -timeout 2h ./store/jetstream/ >>"$tmp/leases" 2>&1 || { cat "$tmp/leases"; exit 1; }
for k in ${LEASES:-1000}; do
  for k2 in ${k//,/ }; do
    WARREN_BENCH_REST_AGENTS="$k2" \
      go test -run '^$' -bench 'ClusterAtRest$' -benchtime 1x -timeout 1h ./engine/ >"$tmp/rest.$k2" 2>&1 || { cat "$tmp/rest.$k2"; exit 1; }
  done
done
echo "load average at end:   $(load)"
echo
# metric FILE BENCH-PREFIX UNIT: the value before UNIT on the line of BENCH-PREFIX
metric() { awk -v b="$2" -v u="$3" 'index($1, b) == 1 { for (i = 2; i <= NF; i++) if ($i == u) { print $(i-1); exit } }' "$1"; }
fmt() { printf '| %-50s | %-40s |\n' "$1" "$2"; }
fmt "what" "measured"
fmt "--------------------------------------------------" "----------------------------------------"
fmt "raw write+fsync (this disk)" "$(metric "$tmp/raw" BenchmarkRawWriteFsync fsyncs/s)/s"
for w in 1 16; do
  for s in local jetstream-R1 jetstream-R3; do
    fmt "appends, $w writer(s) on $w log(s), $s" "$(metric "$tmp/append" "BenchmarkAppend/$s/writers=$w-" appends/s)/s"
  done
done
for s in local jetstream-R1 jetstream-R3; do
  fmt "turn through the daemon, $s" "p50 $(metric "$tmp/turn" "BenchmarkStoreTurn/$s-" p50-ms) ms, p99 $(metric "$tmp/turn" "BenchmarkStoreTurn/$s-" p99-ms) ms, $(metric "$tmp/turn" "BenchmarkStoreTurn/$s-" turns/s)/s"
done
fill=$(grep -o 'filled the stream in [^ ]*' "$tmp/recovery" | awk '{print $5}')
for r in R1 R3; do
  for m in fold clean-stop kill; do
    v=$(metric "$tmp/recovery" "BenchmarkRecoveryJetStream/agents=$agents/events=$events/jetstream-$r/$m-" s/recovery)
    if [ -n "$v" ]; then fmt "recovery, $agents x $events events, $r, $m" "$v s"; fi
  done
done
echo "(the R1 stream filled in $fill without fsync, then served sync-always)"
for n in ${LEASES:-1000}; do
  n=${n//,/ }
  for k in $n; do
    for r in R1/daemon R3/daemon R1/keys; do
      v=$(metric "$tmp/leases" "BenchmarkLeasesAtRest/$r/leases=$k-" cpu-s/s)
      if [ -n "$v" ]; then fmt "leases at rest, $k agents, ${r%/*}, ${r#*/} claims" "$v CPU-s/s"; fi
    done
    fmt "a recovered core at rest, $k agents, R1 (scans too)" "$(metric "$tmp/rest.$k" BenchmarkClusterAtRest cpu-s/s) CPU-s/s"
  done
done
