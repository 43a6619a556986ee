package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/attach"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/notices"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/textarg"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

func newAgentSendCmd(c *cli) *cobra.Command {
	var prov, model, file string
	cmd := &cobra.Command{
		Use:   "send REF (MESSAGE | - | --file PATH) [--provider P] [--model M]",
		Short: "send a message and print the agent's response when its turn ends",
		Long: `Send a message to an agent and wait for its turn to end: print the response,
or, when the run waits for input, the command that answers it. A MESSAGE of
"-" is read from standard input, --file PATH reads it from a file (both take
messages over the 128 KiB a command-line argument may hold).

Ctrl-C stops waiting, not the turn: it goes on in the daemon; follow it with
warren events -f REF, cancel it with warren agent cancel REF (exit 130).`,
		Example: indent(`warren agent send lead "plan the release"
git diff | warren agent send reviewer -
warren agent send lead --file brief.md --provider anthropic --model claude-sonnet-4-5`),
		Args:              usage.Args(1, 2, "REF", "MESSAGE"),
		ValidArgsFunction: c.completer().Agents,
	}
	f := cmd.Flags()
	f.StringVar(&prov, "provider", "", "provider for this run")
	f.StringVar(&model, "model", "", "model for this run")
	f.StringVar(&file, "file", "", "read the message from this file")
	_ = cmd.RegisterFlagCompletionFunc("provider", c.completer().Providers)
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
		msg, err := c.messageArg(cmd, "MESSAGE", pos[1:], file, true)
		if err != nil {
			return err
		}
		params := map[string]any{"agent_id": pos[0], "message": msg}
		setIf(params, "provider", prov)
		setIf(params, "model", model)
		finish := notices.WatchSend(ctx, c.notices(), pos[0])
		res, err := c.daemon().Call(ctx, "agent.send", params)
		finish()
		if err != nil {
			if ctx.Err() != nil {
				return c.sendInterrupted(ctx, pos[0])
			}
			return c.daemon().Lost(ctx, err)
		}
		if c.json {
			return reply.JSON(c.stdout, res)
		}
		if err := c.fillResponse(ctx, res); err != nil {
			return err
		}
		render.RunResult(c.stdout, c.stderr, pos[0], c.daemon().HomeArg(), res)
		return nil
	})
	return cmd
}

// messageArg reads the text argument of send or resume: rest holds the
// positional argument after REF (if any), file is --file.
func (c *cli) messageArg(cmd *cobra.Command, what string, rest []string, file string, required bool) (string, error) {
	switch {
	case file != "" && len(rest) > 0:
		return "", exit.Usagef(cmd.UseLine(), "give the %s as an argument, as - (standard input) or with --file, not both", what)
	case file != "":
		return textarg.Read(c.stdin, what, "", file)
	case len(rest) > 0:
		return textarg.Read(c.stdin, what, rest[0], "")
	case required:
		return "", exit.Usagef(cmd.UseLine(), "%s: missing %s (or - to read it from standard input, or --file PATH)", cmd.CommandPath(), what)
	}
	return "", nil
}

// sendInterrupted is what Ctrl-C on agent send says: the turn goes on in
// the daemon, and how to follow or cancel it. Exit 130.
func (c *cli) sendInterrupted(ctx context.Context, ref string) error {
	home := c.daemon().HomeArg()
	fmt.Fprintf(c.stderr, "\ninterrupted: stopped waiting; the turn goes on in the daemon.\n"+
		"  follow it:  warren events -f %s%s\n"+
		"  cancel it:  warren agent cancel %s%s\n", render.ShellQuote(ref), home, render.ShellQuote(ref), home)
	return &exit.Error{Code: signalExit(ctx)}
}

func newAgentResumeCmd(c *cli) *cobra.Command {
	var token, tokenID, file string
	var all, recursive, keepWorkspace bool
	cmd := &cobra.Command{
		Use:   "resume REF [--token T | --token-id ID] [RESPONSE | - | --file PATH] | --all | REF --recursive",
		Short: "answer a waiting run (by token or token id), or re-run interrupted runs",
		Long: `Answer a run that waits for input with its token (printed when it suspended)
or its token id (listed by warren waits) and a RESPONSE ("-" reads it from
standard input, --file from a file). Without a token, re-run an
interrupted run: one a stop, a crash or a takeover cut off, or one whose
wait timed out (its await_input is answered {"error": "wait timed out",
"timed_out": true}). --recursive re-runs every interrupted run under REF,
--all every one in the tree; both return at once, listing what started.
Under the resume policy auto (the default but for acp agents) a start
re-runs interrupted runs by itself; see warren daemon status.`,
		Example: indent(`warren agent resume lead/w1 --token-id 3f9c... yes
warren agent resume lead --token 'tok.secret' - < answer.txt
warren agent resume lead             # re-run its interrupted run
warren agent resume lead --recursive # and those of its subtree
warren agent resume --all`),
		Args:              usage.Args(0, 2, "REF", "RESPONSE"),
		ValidArgsFunction: c.completer().Agents,
	}
	f := cmd.Flags()
	f.StringVar(&token, "token", "", "the resume token printed when the run suspended")
	f.StringVar(&tokenID, "token-id", "", "the wait's public token id (warren waits lists them)")
	f.StringVar(&file, "file", "", "read the response from this file")
	f.BoolVar(&all, "all", false, "re-run every interrupted run in the tree")
	f.BoolVar(&recursive, "recursive", false, "re-run every interrupted run in REF's subtree")
	f.BoolVar(&keepWorkspace, "keep-workspace", false, "re-run on the workspace's files as the interrupted attempt left them (not restored to the run's start)")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
		if all || recursive {
			return c.resumeTree(ctx, cmd, pos, all, token != "" || tokenID != "" || file != "")
		}
		if len(pos) == 0 {
			return exit.Usagef(cmd.UseLine(), "name the agent (REF), or pass --all")
		}
		if token != "" && tokenID != "" {
			return exit.Usagef(cmd.UseLine(), "give --token or --token-id, not both")
		}
		hasResp := len(pos) == 2 || file != ""
		if (token != "" || tokenID != "") && !hasResp {
			return exit.Usagef(cmd.UseLine(), "--token and --token-id need a RESPONSE to hand to the agent")
		}
		params := map[string]any{"agent_id": pos[0]}
		if keepWorkspace {
			params["keep_workspace"] = true
		}
		setIf(params, "token", token)
		setIf(params, "token_id", tokenID)
		if hasResp {
			resp, err := c.messageArg(cmd, "RESPONSE", pos[1:], file, false)
			if err != nil {
				return err
			}
			params["response"] = resp
		}
		res, show, err := c.callOut(ctx, "agent.resume", params)
		if err != nil || !show {
			return err
		}
		if err := c.fillResponse(ctx, res); err != nil {
			return err
		}
		if _, ok := res["response"]; ok || reply.Str(res, "status") == "suspended" {
			render.RunResult(c.stdout, c.stderr, pos[0], c.daemon().HomeArg(), res)
			return nil
		}
		fmt.Fprintf(c.stdout, "resumed %s (%s)\n", pos[0], render.Dash(reply.Str(res, "status")))
		return nil
	})
	return cmd
}

// resumeTree is agent resume --all or REF --recursive.
func (c *cli) resumeTree(ctx context.Context, cmd *cobra.Command, pos []string, all, answering bool) error {
	switch {
	case answering:
		return exit.Usagef(cmd.UseLine(), "--all and --recursive re-run interrupted runs; they take no token or response")
	case all && len(pos) > 0:
		return exit.Usagef(cmd.UseLine(), "--all takes no REF (it re-runs the whole tree's interrupted runs)")
	case !all && len(pos) != 1:
		return exit.Usagef(cmd.UseLine(), "--recursive needs the REF whose subtree to re-run")
	}
	params := map[string]any{"all": all, "recursive": !all}
	if !all {
		params["agent_id"] = pos[0]
	}
	res, show, err := c.callOut(ctx, "agent.resume", params)
	if err != nil || !show {
		return err
	}
	render.Interrupted(c.stdout, reply.List(res, "runs"), "no interrupted run to re-run")
	return nil
}

func newAgentTerminateCmd(c *cli) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:     "terminate REF [--recursive]",
		Aliases: []string{"rm"},
		Short:   "terminate an agent (with --recursive, its whole subtree, children first)",
		Long: `Terminate an agent: its log records agent.terminated and it leaves the tree
(warren agent list --all still shows it). An agent with children is refused
unless --recursive, which terminates the subtree, deepest first, and prints
each agent as it goes. An agent mid-turn is refused: cancel it first.`,
		Example:           indent("warren agent terminate lead/w1\nwarren agent rm lead --recursive"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "terminate the agent's children (all descendants) first")
	cmd.RunE = c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
		params := map[string]any{"agent_id": pos[0]}
		if recursive {
			params["recursive"] = true
		}
		res, show, err := c.callOut(ctx, "agent.terminate", params)
		if err != nil || !show {
			return err
		}
		if done := reply.List(res, "terminated"); recursive && len(done) > 0 {
			for _, a := range done {
				fmt.Fprintf(c.stdout, "terminated %s  %s\n", reply.Str(a, "agent_id"), reply.Str(a, "path"))
			}
			return nil
		}
		id := reply.Str(res, "agent_id")
		if id == "" {
			id = pos[0]
		}
		fmt.Fprintf(c.stdout, "terminated %s\n", id)
		return nil
	})
	return cmd
}

func newAgentCancelCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:               "cancel REF",
		Short:             "cancel the agent's running turn or its wait; the agent becomes idle",
		Example:           indent("warren agent cancel lead"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			res, show, err := c.callOut(ctx, "agent.cancel", map[string]any{"agent_id": pos[0]})
			if err != nil || !show {
				return err
			}
			id := reply.Str(res, "agent_id")
			if id == "" {
				id = pos[0]
			}
			fmt.Fprintf(c.stdout, "cancelled %s\n", id)
			return nil
		}),
	}
}

func newAgentResetCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:               "reset REF",
		Short:             "start the agent on a fresh context from its instructions (the log keeps every turn)",
		Example:           indent("warren agent reset lead"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			_, show, err := c.callOut(ctx, "agent.reset", map[string]any{"agent_id": pos[0]})
			if err != nil || !show {
				return err
			}
			fmt.Fprintf(c.stdout, "%s starts its next turn on a fresh context (its log keeps the earlier turns)\n", pos[0])
			return nil
		}),
	}
}

func newAgentAttachCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "attach REF",
		Short: "talk to an agent interactively: each line is a message, the response streams back",
		Example: indent(`warren agent attach lead
printf 'first\nsecond\n' | warren agent attach lead`),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			s := &attach.Session{Daemon: c.daemon(), Notices: c.notices(), Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr, JSON: c.json}
			return s.Run(ctx, pos[0])
		}),
	}
}
