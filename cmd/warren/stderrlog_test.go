package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// chattyScript answers every turn and says so on stderr.
const chattyScript = `#!/bin/sh
while read -r line; do
  echo "bot saw a turn" >&2
  echo '{"type":"done","response":"ok"}'
done
`

func TestLogsStderrPrintsWhatAHealthyBotWroteToStderr(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	script := filepath.Join(home, "chatty.sh")
	if err := os.WriteFile(script, []byte(chattyScript), 0o700); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "bot", "--provider", "scripted", "--model", script, "--home", home)
	mustOK(t, "agent", "send", "bot", "one", "--home", home)
	mustOK(t, "agent", "send", "bot", "two", "--home", home)
	// A reset stops the bot's process; its stderr has drained when it returns.
	mustOK(t, "agent", "reset", "bot", "--home", home)
	if out := mustOK(t, "logs", "--stderr", "bot", "--home", home); out != "bot saw a turn\nbot saw a turn\n" {
		t.Fatalf("warren logs --stderr printed %q", out)
	}
	j := mustJSON(t, "logs", "--stderr", "bot", "--home", home)
	if !strings.HasSuffix(reply.Str(j, "agent_dir"), reply.Str(mustJSON(t, "agent", "inspect", "bot", "--home", home), "agent_id")) ||
		reply.Str(j, "text") != "bot saw a turn\nbot saw a turn\n" {
		t.Fatalf("warren logs --stderr --json = %v", j)
	}
	if r := warren(t, "logs", "--stderr", "-f", "bot", "--home", home); r.code != exit.Usage {
		t.Fatalf("logs --stderr -f: exit %d, want a usage error", r.code)
	}
}
