package render

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// RunResult prints an agent.send/agent.resume result: the response, or the
// wait and the exact command that resumes it, on out; what the message
// revoked or abandoned on errw. homeArg is " --home H" when the user gave
// --home, for the printed commands.
func RunResult(out, errw io.Writer, ref, homeArg string, res map[string]any) {
	if w := reply.Obj(res, "revoked_wait"); w != nil {
		fmt.Fprintf(errw, "note: this message revoked %s's pending wait (%s, token id %s): its token no longer answers it\n",
			ref, Dash(reply.Str(w, "kind")), reply.Str(w, "token_id"))
	}
	if r := reply.Str(res, "abandoned_run"); r != "" {
		fmt.Fprintf(errw, "note: this message abandoned %s's run %s, interrupted by a daemon restart (a new run started instead)\n", ref, r)
	}
	if reply.Str(res, "status") != "suspended" {
		fmt.Fprintln(out, reply.Str(res, "response"))
		return
	}
	wait := reply.Obj(res, "wait")
	fmt.Fprintf(out, "%s is waiting for input", ref)
	if k := reply.Str(wait, "kind"); k != "" {
		fmt.Fprintf(out, " (%s)", k)
	}
	fmt.Fprintf(out, ": %s\n", reply.Str(wait, "prompt"))
	fmt.Fprintf(out, "resume with: warren agent resume %s%s --token %s RESPONSE\n", ShellQuote(ref), homeArg, ShellQuote(reply.Str(res, "token")))
	if id := reply.Str(wait, "token_id"); id != "" {
		fmt.Fprintf(out, "token id: %s\nor by token id: warren agent resume %s%s --token-id %s RESPONSE\n",
			id, ShellQuote(ref), homeArg, ShellQuote(id))
	}
}

// Waits renders a waits.list result: a table of the pending waits and the
// command that answers the first (homeArg, " --home H" or "", as the
// other hints keep it).
func Waits(w io.Writer, ws []map[string]any, now time.Time, homeArg string) {
	if len(ws) == 0 {
		fmt.Fprintln(w, "no pending waits")
		return
	}
	rows := [][]string{}
	for _, x := range ws {
		rows = append(rows, []string{reply.Str(x, "path"), Dash(reply.Str(x, "kind")), reply.Str(x, "token_id"),
			ago(now, reply.Str(x, "since")), until(now, reply.Str(x, "deadline")), reply.Str(x, "prompt")})
	}
	table(w, []string{"AGENT", "KIND", "TOKEN ID", "AGE", "DEADLINE", "PROMPT"}, rows)
	first := ws[0]
	fmt.Fprintf(w, "answer one with: warren agent resume %s --token-id %s RESPONSE%s\n",
		ShellQuote(reply.Str(first, "path")), reply.Str(first, "token_id"), homeArg)
}

// Providers renders a daemon.providers result: name, type, base URL,
// model and whether the key variable is set (never a key).
func Providers(w io.Writer, providers []map[string]any) {
	rows := [][]string{}
	for _, p := range providers {
		key := "-"
		if env := reply.Str(p, "api_key_env"); env != "" {
			key = "$" + env + " unset"
			if b, _ := p["key_set"].(bool); b {
				key = "$" + env + " set"
			}
		}
		rows = append(rows, []string{reply.Str(p, "name"), reply.Str(p, "type"), Dash(reply.Str(p, "base_url")), Dash(reply.Str(p, "model")), key})
	}
	table(w, []string{"NAME", "TYPE", "BASE URL", "MODEL", "KEY"}, rows)
}

// UserInbox renders an inbox.list result: the messages root agents sent to
// the user, and how many are left.
func UserInbox(w io.Writer, res map[string]any) {
	msgs := reply.List(res, "messages")
	if len(msgs) == 0 {
		fmt.Fprintln(w, "no messages")
		return
	}
	for _, m := range msgs {
		fmt.Fprintf(w, "%s  from=%s  %s\n", clock(reply.Str(m, "timestamp"), false), reply.Str(m, "from"), reply.Str(m, "text"))
	}
	if n := reply.Num(res, "remaining"); n > 0 {
		fmt.Fprintf(w, "%d more messages: run warren inbox again\n", n)
	}
}

// Interrupted renders interrupted runs (daemon.status's interrupted,
// agent.resume's runs): what was re-run, what is left and why, and the
// command for the rest; none prints when there are none.
func Interrupted(w io.Writer, runs []map[string]any, none string) {
	if len(runs) == 0 {
		if none != "" {
			fmt.Fprintln(w, none)
		}
		return
	}
	var left []string
	for _, r := range runs {
		what := "re-run"
		if !reply.Bool(r, "rerun") {
			what = "left: " + reply.Str(r, "left")
			left = append(left, reply.Str(r, "path"))
		}
		fmt.Fprintf(w, "  %s  run %s (%s): %s\n", reply.Str(r, "path"), Cut(reply.Str(r, "run_id"), 12), reply.Str(r, "reason"), what)
	}
	switch {
	case len(left) == 1:
		fmt.Fprintf(w, "re-run it with: warren agent resume %s\n", ShellQuote(left[0]))
	case len(left) > 1:
		fmt.Fprintln(w, "re-run them with: warren agent resume --all")
	}
}

// Cluster prints daemon.status's cluster block: this node, its role, the
// active node, the servers of the log and, on the active node, the
// remote workers.
func Cluster(w io.Writer, c map[string]any) {
	active := reply.Str(c, "active_node")
	if active == "" {
		active = "unknown (no daemon holds the USER inbox, or the cluster did not answer)"
	}
	fmt.Fprintf(w, "cluster   node %s, %s; active node %s\n", reply.Str(c, "node"), reply.Str(c, "role"), active)
	if peers := reply.Strs(c, "peers"); len(peers) > 0 {
		fmt.Fprintf(w, "          log servers %s (leader first)\n", strings.Join(peers, ", "))
	}
	if h := reply.Str(c, "config_hash"); h != "" {
		differ := reply.Strs(c, "config_differs")
		if len(differ) == 0 {
			fmt.Fprintf(w, "          provider entries %s, as on every node that recorded its own\n", h)
		} else {
			fmt.Fprintf(w, "          provider entries %s; DIFFERENT on %s (a takeover runs the agents with the taking node's config.json)\n", h, strings.Join(differ, ", "))
		}
	}
	if e := reply.Str(c, "error"); e != "" {
		fmt.Fprintf(w, "          the cluster did not answer: %s\n", Cut(e, 200))
	}
	if _, listed := c["workers"]; listed {
		Workers(w, reply.List(c, "workers"))
	}
}

// Workers prints the remote workers: each one's pools (the daemon's
// sessions there of the pool's size) and labels.
func Workers(w io.Writer, ws []map[string]any) {
	if len(ws) == 0 {
		fmt.Fprintln(w, "workers   none (warren worker --join ...; see docs/WORKERS.md)")
		return
	}
	for i, wk := range ws {
		pools := reply.Obj(wk, "pools")
		names := make([]string, 0, len(pools))
		for name := range pools {
			names = append(names, name)
		}
		sort.Strings(names)
		parts := make([]string, 0, len(names))
		for _, name := range names {
			p, _ := pools[name].(map[string]any)
			parts = append(parts, fmt.Sprintf("%s %d/%d", name, reply.Num(p, "placed"), reply.Num(p, "size")))
		}
		labels := reply.Obj(wk, "labels")
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k+"="+reply.Str(labels, k))
		}
		sort.Strings(keys)
		head := "          "
		if i == 0 {
			head = "workers   "
		}
		line := fmt.Sprintf("%s%s: %s", head, reply.Str(wk, "id"), strings.Join(parts, ", "))
		if len(keys) > 0 {
			line += " [" + strings.Join(keys, ",") + "]"
		}
		fmt.Fprintln(w, line)
	}
}

// Status renders a daemon.status result of the daemon of home.
func Status(w io.Writer, home string, st map[string]any) {
	up := time.Duration(reply.Num(st, "uptime_s")) * time.Second
	fmt.Fprintf(w, "running   pid %d\n", reply.Num(st, "pid"))
	fmt.Fprintf(w, "home      %s\n", home)
	fmt.Fprintf(w, "boot id   %s\n", reply.Str(st, "boot_id"))
	fmt.Fprintf(w, "version   %s\n", reply.Str(st, "version"))
	fmt.Fprintf(w, "uptime    %s\n", up)
	fmt.Fprintf(w, "agents    %d\n", reply.Num(st, "agents"))
	if c := reply.Obj(st, "cluster"); c != nil {
		Cluster(w, c)
	}
	if msg := reply.Str(st, "config_error"); msg != "" {
		fmt.Fprintf(w, "config    INVALID: %s\n", msg)
	}
	if c := reply.Obj(st, "console"); c != nil {
		fmt.Fprintf(w, "console   %s (pair a browser: warren console)\n", reply.Str(c, "url"))
	}
	if n := reply.Obj(st, "notify"); n != nil {
		fmt.Fprintf(w, "notify    %d sink(s), %d delivered, %d pending\n", len(reply.List(n, "sinks")), reply.Num(n, "delivered"), reply.Num(n, "pending"))
		for _, s := range reply.List(n, "sinks") {
			if e := reply.Str(s, "last_error"); e != "" {
				fmt.Fprintf(w, "          %s failing: %s\n", reply.Str(s, "name"), Cut(e, 200))
			}
			if d := reply.Num(s, "dropped"); d > 0 {
				fmt.Fprintf(w, "          %s dropped %d (delivered again at the next start)\n", reply.Str(s, "name"), d)
			}
		}
	}
	if n := reply.Num(st, "degraded"); n > 0 {
		what := "agents whose logs refuse"
		if n == 1 {
			what = "agent whose log refuses"
		}
		fmt.Fprintf(w, "degraded  %d %s appends (see warren agent list)\n", n, what)
	}
	if q := reply.Num(st, "quarantined"); q > 0 {
		fmt.Fprintf(w, "quarantine %d in %s (unreadable agent directories; see daemon.log)\n",
			q, filepath.Join(home, "quarantine"))
	}
	if runs := reply.List(st, "interrupted"); len(runs) > 0 {
		fmt.Fprintf(w, "this start found %d interrupted run(s):\n", len(runs))
		Interrupted(w, runs, "")
	}
	pools := reply.Obj(st, "pools")
	if len(pools) == 0 {
		return
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		p, _ := pools[n].(map[string]any)
		rows = append(rows, []string{n, strconv.FormatInt(reply.Num(p, "slots"), 10), strconv.FormatInt(reply.Num(p, "live"), 10), strconv.FormatInt(reply.Num(p, "held"), 10)})
	}
	fmt.Fprintln(w)
	table(w, []string{"POOL", "SLOTS", "LIVE", "HELD"}, rows)
}

// WorkspaceLog renders a workspace.log result: the worktree and branch,
// then a table of its snapshots.
func WorkspaceLog(w io.Writer, res map[string]any, now time.Time) {
	state := "open"
	if reply.Bool(res, "closed") {
		state = "closed (its branch keeps the work)"
	}
	fmt.Fprintf(w, "workspace %s\nbranch    %s (from %s, in %s)\nstate     %s\n", reply.Str(res, "path"), reply.Str(res, "branch"),
		Cut(reply.Str(res, "base"), 12), reply.Str(res, "repo"), state)
	snaps := reply.List(res, "snapshots")
	if len(snaps) == 0 {
		fmt.Fprintln(w, "no snapshots yet (no turn ran in it)")
		return
	}
	rows := make([][]string, 0, len(snaps))
	for _, s := range snaps {
		changed := strconv.FormatInt(reply.Num(s, "files_changed"), 10)
		if reply.Num(s, "files_changed") < 0 {
			changed = "-"
		}
		rows = append(rows, []string{strconv.FormatInt(reply.Num(s, "turn"), 10), reply.Str(s, "at"), Cut(reply.Str(s, "commit"), 12),
			changed, ago(now, reply.Str(s, "ts")), Cut(reply.Str(s, "run_id"), 12)})
	}
	fmt.Fprintln(w)
	table(w, []string{"TURN", "AT", "COMMIT", "FILES", "WHEN", "RUN"}, rows)
}
