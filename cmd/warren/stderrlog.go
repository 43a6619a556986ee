package main

import (
	"fmt"
	"path/filepath"

	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/stderrlog"
)

// printStderrLog prints what the agent's processes wrote to stderr, oldest
// first, from the agent directory of the log at logPath (`warren logs
// --stderr REF`). With --json it prints {"agent_dir", "files":[...], "text"}.
func (c *cli) printStderrLog(logPath string) error {
	dir := filepath.Dir(logPath)
	files, text, err := offline.Stderr(logPath)
	if err != nil {
		return err
	}
	if c.json {
		out := []any{}
		for _, f := range files {
			out = append(out, f)
		}
		return reply.JSON(c.stdout, map[string]any{"agent_dir": dir, "files": out, "text": string(text)})
	}
	if len(files) == 0 {
		fmt.Fprintf(c.stderr, "no stderr kept for this agent (its processes wrote none, or never ran): %s\n",
			filepath.Join(dir, stderrlog.Name))
		return nil
	}
	_, err = c.stdout.Write(text)
	return err
}
