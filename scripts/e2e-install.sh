#!/usr/bin/env bash
# Installs the pinned agent CLIs and clients used by the WARREN_E2E=1 tests
# into a local directory (default .e2e/ in the repository; override with
# WARREN_E2E_DIR). Needs node and npm. With no argument it installs them
# all; otherwise only the named ones:
#
#   claude      @anthropic-ai/claude-code (the Anthropic fake's oracle)
#   claude-acp  @agentclientprotocol/claude-agent-acp (Claude Code over ACP)
#   codex-acp   @agentclientprotocol/codex-acp (Codex over ACP)
#   gemini      @google/gemini-cli (gemini --acp)
#   opencode    opencode-ai (opencode acp)
#   mcp-sdk     @modelcontextprotocol/sdk (a real MCP client for the bridge)
#
# Prints one line per installed name: NAME PATH (the binary, or the
# package directory for mcp-sdk). Sizes: the agents take 100-460 MB each.
#
#   scripts/e2e-install.sh claude && WARREN_E2E=1 go test -run TestE2E ./provider/anthropic/
#   scripts/e2e-install.sh mcp-sdk && WARREN_E2E=1 go test -run TestE2EMCPBridge ./tests/
#   scripts/e2e-install.sh && WARREN_E2E=1 go test -count=1 -run TestE2E -v ./tests/ ./provider/llmfake/
#     (every agent over ACP on a real daemon, and the Claude-lead/Codex-worker
#     crash scenario; WARREN_E2E_EXCLUDE=gemini,... excludes agents by name)
#
# The versions are those the provider study verified against the fake LLM
# servers (../shared/reference/providers.md sections 4-6); bump them here,
# in one place, and re-run the e2e tests.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${WARREN_E2E_DIR:-$PWD/.e2e}"

declare -A pkg=(
  [claude]="@anthropic-ai/claude-code@2.1.330"
  [claude-acp]="@agentclientprotocol/claude-agent-acp@0.101.0"
  [codex-acp]="@agentclientprotocol/codex-acp@2.6.0"
  [gemini]="@google/gemini-cli@0.61.0"
  [opencode]="opencode-ai@1.18.33"
  [mcp-sdk]="@modelcontextprotocol/sdk@1.32.2"
)
declare -A bin=(
  [claude]="claude"
  [claude-acp]="claude-agent-acp"
  [codex-acp]="codex-acp"
  [gemini]="gemini"
  [opencode]="opencode"
)
order=(claude claude-acp codex-acp gemini opencode mcp-sdk)

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=("${order[@]}")
fi
specs=()
for n in "${names[@]}"; do
  if [ -z "${pkg[$n]:-}" ]; then
    echo "e2e-install: unknown name $n (known: ${order[*]})" >&2
    exit 2
  fi
  specs+=("${pkg[$n]}")
done

mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then
  printf '{"name":"warren-e2e","private":true}\n' >"$dir/package.json"
fi
npm install --prefix "$dir" --no-audit --no-fund --save-exact "${specs[@]}" >&2

for n in "${names[@]}"; do
  if [ "$n" = mcp-sdk ]; then
    echo "$n $dir/node_modules/@modelcontextprotocol/sdk"
    continue
  fi
  path="$dir/node_modules/.bin/${bin[$n]}"
  if [ ! -x "$path" ]; then
    echo "e2e-install: $n installed but $path is missing" >&2
    exit 1
  fi
  echo "$n $path"
done
