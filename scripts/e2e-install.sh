#!/usr/bin/env bash
# Installs the pinned agent CLIs used by the WARREN_E2E=1 tests into a local
# directory (default .e2e/ in the repository; override with WARREN_E2E_DIR).
# Needs node and npm. Prints the path of the claude binary.
#
#   scripts/e2e-install.sh && WARREN_E2E=1 go test -run TestE2E ./provider/anthropic/
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${WARREN_E2E_DIR:-$PWD/.e2e}"
claude_version="2.1.330" # @anthropic-ai/claude-code, the version the provider study verified
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then
  printf '{"name":"warren-e2e","private":true}\n' >"$dir/package.json"
fi
npm install --prefix "$dir" --no-audit --no-fund --save-exact "@anthropic-ai/claude-code@${claude_version}" >&2
bin="$dir/node_modules/.bin/claude"
"$bin" --version >&2
echo "$bin"
