package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// cmdWaits lists every pending wait in the tree (SPEC 4): whoever started
// it, the operator finds it here and answers it by its token id.
func newWaitsCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "waits",
		Short:   "list every pending wait in the tree: agent, kind, token id, age, deadline, prompt",
		Example: indent("warren waits\nwarren agent resume lead/w1 --token-id ID yes   # answer one"),
		Args:    args(0, 0),
		RunE:    c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error { return c.waits(ctx) }),
	}
}

func (c *cli) waits(ctx context.Context) error {
	res, show, err := c.callOut(ctx, "waits.list", nil)
	if err != nil || !show {
		return err
	}
	ws := list(res, "waits")
	if len(ws) == 0 {
		fmt.Fprintln(c.stdout, "no pending waits")
		return nil
	}
	now := time.Now()
	rows := [][]string{}
	for _, w := range ws {
		rows = append(rows, []string{str(w, "path"), dash(str(w, "kind")), str(w, "token_id"),
			ago(now, str(w, "since")), until(now, str(w, "deadline")), str(w, "prompt")})
	}
	table(c.stdout, []string{"AGENT", "KIND", "TOKEN ID", "AGE", "DEADLINE", "PROMPT"}, rows)
	w := ws[0]
	fmt.Fprintf(c.stdout, "answer one with: warren agent resume %s --token-id %s RESPONSE\n",
		shellQuote(str(w, "path")), str(w, "token_id"))
	return nil
}

// ago shows how long ago an RFC 3339 time was ("-" when unknown).
func ago(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

// until shows how long until an RFC 3339 time ("overdue" once passed).
func until(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "overdue"
	}
	return "in " + d.String()
}
