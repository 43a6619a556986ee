package main

import (
	"context"
	"fmt"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/textarg"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

func newAgentCreateCmd(c *cli) *cobra.Command {
	var instr, instrFile, prov, model, parent, workspace string
	var sandboxed bool
	meta := kvFlag{}
	cmd := &cobra.Command{
		Use:   "create NAME [--instructions T | --instructions-file F] [--provider P] [--model M] [--parent REF] [--metadata k=v ...] [--workspace[=REPO]] [--sandbox]",
		Short: "create an agent (a root, or a child of --parent)",
		Example: indent(`warren agent create lead --provider openai --model gpt-4o-mini --instructions "You lead a small team."
warren agent create w1 --parent lead --provider inproc --model echo --metadata role=worker
warren agent create bot --provider scripted --model ./bots/bot.py
warren agent create reviewer --instructions-file prompts/reviewer.md
warren agent create coder --provider claude --workspace   # a worktree of the repository here, on a branch of its own
warren agent create coder --provider claude --workspace --sandbox   # confined to it with bubblewrap`),
		Args: usage.Args(1, 1, "NAME"),
	}
	f := cmd.Flags()
	f.StringVar(&instr, "instructions", "", "the agent's instructions (system prompt)")
	f.StringVar(&instrFile, "instructions-file", "", "read the instructions from this file (- for standard input)")
	f.StringVar(&workspace, "workspace", "", "give the agent a git worktree of REPO (no value: the repository here) on a branch of its own, as its working directory")
	f.Lookup("workspace").NoOptDefVal = "."
	f.BoolVar(&sandboxed, "sandbox", false, "run the agent's processes confined with bubblewrap: its workspace (or working directory) and a private home read-write, the system read-only, nothing else of yours")
	f.StringVar(&prov, "provider", "", "provider name (default: the daemon's)")
	f.StringVar(&model, "model", "", "model (default: the provider's); for scripted, the script's path")
	f.StringVar(&parent, "parent", "", "parent agent reference (default: a root agent)")
	f.Var(meta, "metadata", "metadata key=value (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("parent", c.completer().AgentFlag)
	_ = cmd.RegisterFlagCompletionFunc("provider", c.completer().Providers)
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
		if instrFile != "" {
			if cmd.Flags().Changed("instructions") {
				return exit.Usagef(cmd.UseLine(), "give --instructions or --instructions-file, not both")
			}
			var err error
			if instrFile == "-" {
				instr, err = textarg.Read(c.stdin, "instructions", "-", "")
			} else {
				instr, err = textarg.Read(c.stdin, "instructions", "", instrFile)
			}
			if err != nil {
				return err
			}
		}
		params := map[string]any{"name": pos[0], "instructions": instr}
		if wd, err := os.Getwd(); err == nil {
			params["cwd"] = wd // the agent works where it was created (SPEC 7)
		}
		setIf(params, "provider", prov)
		setIf(params, "model", scriptModel(prov, model))
		setIf(params, "parent", parent)
		if workspace != "" {
			repo, err := filepath.Abs(workspace)
			if err != nil {
				return err
			}
			params["workspace"] = map[string]any{"repo": repo}
		}
		if sandboxed {
			params["sandbox"] = true
		}
		if len(meta) > 0 {
			m := make(map[string]any, len(meta))
			for k, v := range meta {
				m[k] = v
			}
			params["metadata"] = m
		}
		res, show, err := c.callOut(ctx, "agent.create", params)
		if err != nil || !show {
			return err
		}
		fmt.Fprintf(c.stdout, "%s  %s\n", reply.Str(res, "agent_id"), reply.Str(res, "name"))
		return nil
	})
	return cmd
}

// scriptModel makes a scripted agent's relative script path absolute against
// the CLI's working directory: the daemon runs elsewhere, and would resolve
// it against its own (issue 14). A model is taken for a script path when the
// provider is "scripted", or when it names an existing file and looks like a
// path (a separator or a ".py" suffix), which covers config entries of type
// scripted under another name.
func scriptModel(prov, model string) string {
	if model == "" || filepath.IsAbs(model) {
		return model
	}
	if prov != "scripted" {
		if !strings.ContainsRune(model, filepath.Separator) && !strings.HasSuffix(model, ".py") {
			return model
		}
		if fi, err := os.Stat(model); err != nil || !fi.Mode().IsRegular() {
			return model
		}
	}
	abs, err := filepath.Abs(model)
	if err != nil {
		return model
	}
	return abs
}

func setIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func newAgentTreeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "tree",
		Short:   "draw the agents as a tree, with their status",
		Example: indent("warren agent tree"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			res, show, err := c.listOut(ctx, nil)
			if err != nil || !show {
				return err
			}
			render.Tree(c.stdout, reply.List(res, "agents"))
			return nil
		}),
	}
}

func newAgentInspectCmd(c *cli) *cobra.Command {
	var since int64
	var limit int
	cmd := &cobra.Command{
		Use:   "inspect REF [--since-seq N] [--limit N]",
		Short: "show one agent: status, instructions, times, wait, children, metadata, pending messages",
		Example: indent(`warren agent inspect lead
warren agent inspect lead/w1 --json
warren agent inspect lead --since-seq 120 --limit 50   # the next page of its inbox`),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
	}
	cmd.Flags().Int64Var(&since, "since-seq", 0, "show the inbox messages logged after this seq (--json pages with inbox_next_seq)")
	cmd.Flags().IntVar(&limit, "limit", 0, "inbox messages per page (default: the daemon's page size)")
	cmd.RunE = c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
		params := map[string]any{"agent_id": pos[0]}
		if since > 0 {
			params["since_seq"] = since
		}
		if limit > 0 {
			params["limit"] = limit
		}
		res, show, err := c.callOut(ctx, "agent.inspect", params)
		if err != nil || !show {
			return err
		}
		render.Inspect(c.stdout, res, time.Now())
		return c.printInbox(ctx, res, params)
	})
	return cmd
}

// printInbox prints the inbox pages of an agent.inspect result as they
// arrive (agent.inspect since_seq/limit), so a large inbox never sits whole
// in memory.
func (c *cli) printInbox(ctx context.Context, res, params map[string]any) error {
	for page, first := res, true; ; first = false {
		msgs := reply.List(page, "inbox")
		render.InboxPage(c.stdout, msgs, first)
		next, ok := page["inbox_next_seq"]
		if !ok || len(msgs) == 0 {
			return nil
		}
		params["since_seq"] = next
		var err error
		if page, err = c.daemon().Call(ctx, "agent.inspect", params); err != nil {
			return err
		}
	}
}

func newInboxCmd(c *cli) *cobra.Command {
	var peek bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "inbox [--peek] [--wait[=DUR]]",
		Short: "drain the messages root agents sent to you (the USER inbox); --peek leaves them, --wait blocks until one comes",
		Long: `Print the messages root agents (and SYSTEM) sent to you, oldest first, and
mark them read. --peek prints them and leaves them in the inbox. --wait
blocks until the inbox holds a message (for at most DUR when given, then
exit 1 with "no message"), the way a script waits for a team's answer.
The log itself is readable with the daemon down: warren logs USER.`,
		Example: indent("warren inbox\nwarren inbox --peek\nwarren agent send lead \"build it\" && warren inbox --wait=30m\nwarren inbox --json"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, cc *cobra.Command, _ []string) error {
			if cc.Flags().Changed("wait") {
				if err := c.waitForUserMessage(ctx, wait); err != nil {
					return err
				}
			}
			res, show, err := c.callOut(ctx, "inbox.list", map[string]any{"peek": peek})
			if err != nil || !show {
				return err
			}
			render.UserInbox(c.stdout, res)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&peek, "peek", false, "leave the messages in the inbox")
	cmd.Flags().DurationVar(&wait, "wait", 0, "block until a message arrives (for at most DUR, e.g. 30s or 10m; no value: as long as it takes)")
	cmd.Flags().Lookup("wait").NoOptDefVal = "0s"
	return cmd
}

// waitForUserMessage blocks until the USER inbox holds a message: for at
// most d (0: as long as it takes), asking the daemon an hour at most at a
// time (inbox.list's wait_s, peeking).
func (c *cli) waitForUserMessage(ctx context.Context, d time.Duration) error {
	if d < 0 {
		return exit.Usagef("warren inbox --wait=DUR", "--wait takes a duration of 0 or more, got %s", d)
	}
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	for {
		waitS := int64(3600)
		if d > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return exit.Failf("no message arrived in the USER inbox within %s", d)
			}
			waitS = min(waitS, int64((left+time.Second-1)/time.Second))
		}
		res, err := c.daemon().Call(ctx, "inbox.list", map[string]any{"peek": true, "wait_s": waitS})
		if err != nil {
			return err
		}
		if msgs, _ := res["messages"].([]any); len(msgs) > 0 {
			return nil
		}
	}
}

func newProvidersCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "providers",
		Short:   "list the provider entries: type, base URL, default model, key variable set or not (never a key)",
		Example: indent("warren providers\nwarren providers --json"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			res, show, err := c.callOut(ctx, "daemon.providers", nil)
			if err != nil || !show {
				return err
			}
			render.Providers(c.stdout, reply.List(res, "providers"))
			return nil
		}),
	}
}
