#!/usr/bin/env bash
# create-fsyncs.sh BIN [PROVIDER MODEL]: what one agent create costs a
# running daemon (issue 38): fsync, syncfs, openat, renameat and unlinkat calls per
# create over 100 creates one by one, counted by strace on the daemon, with
# a fresh home under /tmp and the daemon let idle before and after (so the
# background writes of the creates are counted). Needs strace.
set -euo pipefail
BIN=${1:?usage: create-fsyncs.sh BIN [PROVIDER MODEL]}
PROV=${2:-inproc}
MODEL=${3:-echo}
dir=$(mktemp -d /tmp/warren-fsyncs.XXXXXX)
H=$dir/h
trap '"$BIN" --home "$H" daemon stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$BIN" --home "$H" daemon start >/dev/null
pid=$(cat "$H/daemon.pid")
"$BIN" --home "$H" agent create warm --provider "$PROV" --model "$MODEL" >/dev/null
sleep 2
strace -f -c -e trace=fsync,fdatasync,syncfs,openat,renameat,unlinkat -p "$pid" -o "$dir/strace" 2>/dev/null &
sp=$!
sleep 1
for i in $(seq 1 100); do "$BIN" --home "$H" agent create "a$i" --provider "$PROV" --model "$MODEL" >/dev/null; done
sleep 4
kill -INT "$sp"
wait "$sp" 2>/dev/null || true
grep -E ' (fsync|fdatasync|syncfs|openat|renameat|unlinkat)$' "$dir/strace" | awk '{printf "%s %.2f per create\n", $NF, $4/100}'
