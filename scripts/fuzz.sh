#!/usr/bin/env bash
# Runs every go test -fuzz target in the module for the given time each
# (default 5s; the long profile: scripts/fuzz.sh 10m). A second argument
# keeps only the targets whose name matches that regular expression.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-5s}"
only="${2:-.}"
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for t in $(printf '%s\n' $targets | grep -E "$only" || true); do
    echo "fuzz $pkg $t ($fuzztime)"
    if ! go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/fuzz-$t.log 2>&1; then
      cat /tmp/fuzz-$t.log
      status=1
    fi
  done
done
exit $status
