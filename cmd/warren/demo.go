package main

import (
	"context"
	"fmt"
	"os"

	"github.com/warren-dev/warren/demo"
)

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
	if err := demo.Run(ctx, c.stdout, demo.Options{Binary: exe, Keep: *keep}); err != nil {
		return err
	}
	return nil
}
