package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/stderrlog"
)

// printStderrLog prints what the agent's processes wrote to stderr, oldest
// first, from the agent directory of the log at logPath (`warren logs
// --stderr REF`). Neither file is followed if it is a symbolic link. With
// --json it prints {"agent_dir", "files":[...], "text"}.
func (c *cli) printStderrLog(logPath string) error {
	dir := filepath.Dir(logPath)
	var files []any
	var text []byte
	for _, name := range []string{stderrlog.Old, stderrlog.Name} {
		p := filepath.Join(dir, name)
		data, err := faultfs.ReadFileNoFollow(faultfs.OS{}, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		files = append(files, p)
		text = append(text, data...)
	}
	if c.json {
		if files == nil {
			files = []any{}
		}
		return printJSON(c.stdout, map[string]any{"agent_dir": dir, "files": files, "text": string(text)})
	}
	if len(files) == 0 {
		fmt.Fprintf(c.stderr, "no stderr kept for this agent (its processes wrote none, or never ran): %s\n",
			filepath.Join(dir, stderrlog.Name))
		return nil
	}
	_, err := c.stdout.Write(text)
	return err
}
