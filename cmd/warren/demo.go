package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/demo"
)

// cmdDemo runs the demo scenario. With --json the step lines are collected
// and printed as one object: {"passed", "error", "steps"}.
func newDemoCmd(c *cli) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:     "demo [--keep]",
		Short:   "run a team of agents, a crash, a recovery, end to end, in a temporary home",
		Example: indent("warren demo\nwarren demo --keep --json"),
		Args:    usage.Args(0, 0),
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the demo's temporary home even when every check passed")
	cmd.RunE = c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error { return c.demo(ctx, keep) })
	return cmd
}

func (c *cli) demo(ctx context.Context, keep bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the warren binary for the demo daemon: %w", err)
	}
	var w io.Writer = c.stdout
	var buf bytes.Buffer
	if c.json {
		w = &buf
	}
	err = demo.Run(ctx, w, demo.Options{Binary: exe, Keep: keep})
	if c.json {
		res := map[string]any{"passed": err == nil, "steps": strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")}
		if err != nil {
			res["error"] = err.Error()
		}
		if perr := reply.JSON(c.stdout, res); perr != nil {
			return perr
		}
		if err != nil {
			return exit.ErrSilent
		}
		return nil
	}
	return err
}
