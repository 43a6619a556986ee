#!/usr/bin/env bash
# Runs benchmarks of two commits side by side in one session, alternating
# runs so that machine noise hits both alike, and prints benchstat's table.
#
#   scripts/bench-compare.sh OLD [NEW] [BENCH_REGEX] [PKG] [COUNT]
#
# NEW defaults to the work tree (HEAD plus uncommitted changes), BENCH_REGEX
# to the issue-12 set (turn, fan-out, recovery of 1,000 x 1,000), PKG to
# ./engine/, COUNT to 6; OLD_PKG names the package in OLD when it differs
# (before the split the benchmarks were in ./daemon/:
# OLD_PKG=./daemon/ scripts/bench-compare.sh 8ff7bab). Needs the Go module
# proxy (benchstat).
set -euo pipefail
cd "$(dirname "$0")/.."
old="${1:?usage: scripts/bench-compare.sh OLD [NEW] [BENCH_REGEX] [PKG] [COUNT]}"
new="${2:-}"
bench="${3:-^(BenchmarkTurn|BenchmarkFanOut|BenchmarkRecovery)$}"
pkg="${4:-./engine/}"
count="${5:-6}"
oldpkg="${OLD_PKG:-$pkg}"
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; git worktree remove --force "$tmp/new" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
build() { # commit-or-empty name package
  local dir=. pkg=$3
  if [ -n "$1" ]; then
    git worktree add -q --detach "$tmp/$2" "$1"
    dir="$tmp/$2"
  fi
  (cd "$dir" && go test -c -o "$tmp/$2.test" "$pkg")
  echo "$(cd "$dir" && pwd)/${pkg#./}"
}
olddir=$(build "$old" old "$oldpkg")
newdir=$(build "$new" new "$pkg")
for i in $(seq "$count"); do
  for side in old new; do
    dir=$olddir; [ "$side" = new ] && dir=$newdir
    (cd "$dir" && "$tmp/$side.test" -test.run '^$' -test.bench "$bench" -test.benchmem -test.count 1) \
      | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$tmp/$side.txt"
  done
done
# One package name on both sides, so that benchstat pairs the rows when
# OLD_PKG differs.
newline=$(grep -m1 '^pkg:' "$tmp/new.txt" || true)
[ -n "$newline" ] && sed -i "s|^pkg:.*|$newline|" "$tmp/old.txt"
go run golang.org/x/perf/cmd/benchstat@latest old="$tmp/old.txt" new="$tmp/new.txt"
