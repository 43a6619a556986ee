package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/warren-dev/warren/demo"
)

// cmdDemo runs the demo scenario. With --json the step lines are collected
// and printed as one object: {"passed", "error", "steps"}.
func cmdDemo(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "demo")
	keep := f.Bool("keep", false, "keep the demo's temporary home even when every check passed")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the warren binary for the demo daemon: %w", err)
	}
	var w io.Writer = c.stdout
	var buf bytes.Buffer
	if c.json {
		w = &buf
	}
	err = demo.Run(ctx, w, demo.Options{Binary: exe, Keep: *keep})
	if c.json {
		res := map[string]any{"passed": err == nil, "steps": strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")}
		if err != nil {
			res["error"] = err.Error()
		}
		if perr := printJSON(c.stdout, res); perr != nil {
			return perr
		}
		if err != nil {
			return errSilent
		}
		return nil
	}
	return err
}
