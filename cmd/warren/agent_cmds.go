package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/warren-dev/warren/protocol"
)

func cmdAgentCreate(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent create")
	instr := f.String("instructions", "", "the agent's instructions (system prompt)")
	prov := f.String("provider", "", "provider name (default: the daemon's)")
	model := f.String("model", "", "model (default: the provider's)")
	parent := f.String("parent", "", "parent agent reference (default: a root agent)")
	meta := kvFlag{}
	f.Var(meta, "metadata", "metadata key=value (repeatable)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	params := map[string]any{"name": pos[0], "instructions": *instr}
	if wd, err := os.Getwd(); err == nil {
		params["cwd"] = wd // the agent works where it was created (SPEC 7)
	}
	setIf(params, "provider", *prov)
	setIf(params, "model", scriptModel(*prov, *model))
	setIf(params, "parent", *parent)
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
	fmt.Fprintf(c.stdout, "%s  %s\n", str(res, "agent_id"), str(res, "name"))
	return nil
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

func cmdAgentList(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent list")
	wide := f.Bool("wide", false, "also show each agent's token usage")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, show, err := c.callOut(ctx, "agent.list", nil)
	if err != nil || !show {
		return err
	}
	agents := list(res, "agents")
	if len(agents) == 0 {
		fmt.Fprintln(c.stdout, "no agents")
		return nil
	}
	sort.SliceStable(agents, func(i, j int) bool { return str(agents[i], "path") < str(agents[j], "path") })
	rows := make([][]string, 0, len(agents))
	for _, a := range agents {
		row := []string{str(a, "path"), str(a, "status"), dash(str(a, "provider")), dash(str(a, "model")), strconv.FormatInt(num(a, "pending"), 10)}
		if *wide {
			row = append(row, dash(usageText(obj(a, "usage"))))
		}
		rows = append(rows, row)
	}
	header := []string{"PATH", "STATUS", "PROVIDER", "MODEL", "PENDING"}
	if *wide {
		header = append(header, "TOKENS (IN/OUT/CACHED)")
	}
	table(c.stdout, header, rows)
	for _, a := range agents {
		if e := str(a, "error"); e != "" {
			fmt.Fprintf(c.stdout, "%s: %s\n", str(a, "path"), e)
		}
		if e := str(a, "degraded"); e != "" {
			fmt.Fprintf(c.stdout, "%s: degraded: %s\n", str(a, "path"), e)
		}
		if str(a, "status") != "suspended" {
			continue
		}
		wait := obj(a, "wait")
		if wait == nil {
			if in, err := c.call(ctx, "agent.inspect", map[string]any{"agent_id": str(a, "agent_id")}); err == nil {
				wait = obj(in, "wait")
			}
		}
		if wait != nil {
			fmt.Fprintf(c.stdout, "%s is waiting: %s\n", str(a, "path"), cut(str(wait, "prompt"), 100))
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdAgentTree(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent tree")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, show, err := c.callOut(ctx, "agent.list", nil)
	if err != nil || !show {
		return err
	}
	agents := list(res, "agents")
	if len(agents) == 0 {
		fmt.Fprintln(c.stdout, "no agents")
		return nil
	}
	renderTree(c.stdout, buildTree(agents))
	return nil
}

// buildTree links agent.list entries by parent_id; agents whose parent is not
// listed become roots.
func buildTree(agents []map[string]any) []*treeNode {
	sort.SliceStable(agents, func(i, j int) bool { return str(agents[i], "name") < str(agents[j], "name") })
	nodes := make(map[string]*treeNode, len(agents))
	for _, a := range agents {
		nodes[str(a, "agent_id")] = &treeNode{label: fmt.Sprintf("%s  [%s]", str(a, "name"), str(a, "status"))}
	}
	var roots []*treeNode
	for _, a := range agents {
		n := nodes[str(a, "agent_id")]
		if p, ok := nodes[str(a, "parent_id")]; ok && p != n {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}

func cmdAgentInspect(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent inspect")
	since := f.Int64("since-seq", 0, "show the inbox messages logged after this seq (--json pages with inbox_next_seq)")
	limit := f.Int("limit", 0, "inbox messages per page (default: the daemon's page size)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	params := map[string]any{"agent_id": pos[0]}
	if *since > 0 {
		params["since_seq"] = *since
	}
	if *limit > 0 {
		params["limit"] = *limit
	}
	res, show, err := c.callOut(ctx, "agent.inspect", params)
	if err != nil || !show {
		return err
	}
	w := c.stdout
	for _, k := range []string{"agent_id", "name", "path", "parent_id", "status", "provider", "model"} {
		fmt.Fprintf(w, "%-10s %s\n", k+":", dash(str(res, k)))
	}
	if wait := obj(res, "wait"); wait != nil {
		fmt.Fprintln(w, "wait:")
		keys := make([]string, 0, len(wait))
		for k := range wait {
			if isSecretKey(k) {
				continue // the secret is shown once, to the client that started the run
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-10s %s\n", k+":", cut(str(wait, k), 200))
		}
	}
	if e := str(res, "last_error"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "last_error:", cut(e, 300))
	}
	if e := str(res, "degraded"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "degraded:", e)
	}
	if u := obj(res, "usage"); u != nil {
		fmt.Fprintf(w, "%-10s %s\n", "tokens:", usageText(u))
	}
	if kids := list(res, "children"); len(kids) > 0 {
		fmt.Fprintln(w, "children:")
		for _, k := range kids {
			fmt.Fprintf(w, "  %s  %s  [%s]\n", str(k, "agent_id"), str(k, "name"), str(k, "status"))
		}
	}
	// The inbox comes in pages (agent.inspect since_seq/limit): print each
	// as it arrives, so a large inbox never sits whole in memory.
	for page, first := res, true; ; first = false {
		msgs := list(page, "inbox")
		if first && len(msgs) > 0 {
			fmt.Fprintln(w, "inbox:")
		}
		for _, m := range msgs {
			from := str(m, "from")
			if from == "" {
				from = str(m, "sender")
			}
			text := str(m, "text")
			if text == "" {
				text = str(m, "payload")
			}
			fmt.Fprintf(w, "  from=%s  %s\n", from, cut(text, 80))
		}
		next, ok := page["inbox_next_seq"]
		if !ok || len(msgs) == 0 {
			return nil
		}
		params["since_seq"] = next
		if page, err = c.call(ctx, "agent.inspect", params); err != nil {
			return err
		}
	}
}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	return k == "token" || k == "secret" || k == "token_secret"
}

func cmdAgentSend(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent send")
	prov := f.String("provider", "", "provider for this run")
	model := f.String("model", "", "model for this run")
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return err
	}
	params := map[string]any{"agent_id": pos[0], "message": pos[1]}
	setIf(params, "provider", *prov)
	setIf(params, "model", *model)
	res, show, err := c.callOut(ctx, "agent.send", params)
	if err != nil || !show {
		return err
	}
	c.printRunResult(pos[0], res)
	return nil
}

// printRunResult prints an agent.send/agent.resume result: the response, or
// the wait and the exact command that resumes it.
func (c *cli) printRunResult(ref string, res map[string]any) {
	if w := obj(res, "revoked_wait"); w != nil {
		fmt.Fprintf(c.stderr, "note: this message revoked %s's pending wait (%s, token id %s): its token no longer answers it\n",
			ref, dash(str(w, "kind")), str(w, "token_id"))
	}
	if r := str(res, "abandoned_run"); r != "" {
		fmt.Fprintf(c.stderr, "note: this message abandoned %s's run %s, interrupted by a daemon restart (a new run started instead)\n", ref, r)
	}
	if str(res, "status") == "suspended" {
		wait := obj(res, "wait")
		fmt.Fprintf(c.stdout, "%s is waiting for input", ref)
		if k := str(wait, "kind"); k != "" {
			fmt.Fprintf(c.stdout, " (%s)", k)
		}
		fmt.Fprintf(c.stdout, ": %s\n", str(wait, "prompt"))
		home := ""
		if c.homeFlag != "" {
			home = " --home " + shellQuote(c.home)
		}
		fmt.Fprintf(c.stdout, "resume with: warren agent resume %s%s --token %s RESPONSE\n", shellQuote(ref), home, shellQuote(str(res, "token")))
		return
	}
	fmt.Fprintln(c.stdout, str(res, "response"))
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func cmdAgentResume(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent resume")
	token := f.String("token", "", "the resume token printed when the run suspended")
	tokenID := f.String("token-id", "", "the wait's public token id (warren waits lists them)")
	pos, err := f.parse(args, 1, 2)
	if err != nil {
		return err
	}
	params := map[string]any{"agent_id": pos[0]}
	setIf(params, "token", *token)
	setIf(params, "token_id", *tokenID)
	if len(pos) == 2 {
		params["response"] = pos[1]
	}
	if *token != "" && *tokenID != "" {
		return usageErr(f.usage, "give --token or --token-id, not both")
	}
	if (*token != "" || *tokenID != "") && len(pos) < 2 {
		return usageErr(f.usage, "--token and --token-id need a RESPONSE to hand to the agent")
	}
	res, show, err := c.callOut(ctx, "agent.resume", params)
	if err != nil || !show {
		return err
	}
	if _, ok := res["response"]; ok || str(res, "status") == "suspended" {
		c.printRunResult(pos[0], res)
		return nil
	}
	fmt.Fprintf(c.stdout, "resumed %s (%s)\n", pos[0], dash(str(res, "status")))
	return nil
}

func cmdAgentTerminate(ctx context.Context, c *cli, args []string) error {
	return simpleAgentCmd(ctx, c, args, "agent terminate", "agent.terminate", "terminated")
}

func cmdAgentCancel(ctx context.Context, c *cli, args []string) error {
	return simpleAgentCmd(ctx, c, args, "agent cancel", "agent.cancel", "cancelled")
}

func simpleAgentCmd(ctx context.Context, c *cli, args []string, name, method, verb string) error {
	f := newFlags(c, name)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	res, show, err := c.callOut(ctx, method, map[string]any{"agent_id": pos[0]})
	if err != nil || !show {
		return err
	}
	id := str(res, "agent_id")
	if id == "" {
		id = pos[0]
	}
	fmt.Fprintf(c.stdout, "%s %s\n", verb, id)
	return nil
}

func cmdAgentAttach(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent attach")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ref := pos[0]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := cl.Call(ctx, "agent.inspect", map[string]any{"agent_id": ref}); err != nil {
		return rpcErr("agent.inspect", err)
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "attached to %s (empty line or Ctrl-D to detach)\n", ref)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(c.stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		if !c.json {
			fmt.Fprint(c.stdout, "> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
			ok = false
		}
		if !ok || strings.TrimSpace(line) == "" {
			if !c.json {
				fmt.Fprintf(c.stdout, "\ndetached from %s\n", ref)
			}
			return nil
		}
		err := cl.Stream(ctx, "agent.stream", map[string]any{"agent_id": ref, "message": line}, func(fr protocol.Frame) error {
			if c.json {
				return printJSON(c.stdout, frameJSON(fr))
			}
			if fr.Chunk != "" {
				fmt.Fprint(c.stdout, fr.Chunk)
			}
			return nil
		})
		if !c.json {
			fmt.Fprintln(c.stdout)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(c.stderr, "error: %s\n", rpcErr("agent.stream", err))
		}
	}
}

// frameJSON is a stream frame as printed with --json.
func frameJSON(fr protocol.Frame) map[string]any {
	if fr.Event != nil {
		return map[string]any{"event": fr.Event}
	}
	return map[string]any{"chunk": fr.Chunk}
}

func cmdInbox(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "inbox")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, show, err := c.callOut(ctx, "inbox.list", nil)
	if err != nil || !show {
		return err
	}
	msgs := list(res, "messages")
	if len(msgs) == 0 {
		fmt.Fprintln(c.stdout, "no messages")
		return nil
	}
	for _, m := range msgs {
		fmt.Fprintf(c.stdout, "%s  from=%s  %s\n", clock(str(m, "timestamp"), false), str(m, "from"), str(m, "text"))
	}
	if n := num(res, "remaining"); n > 0 {
		fmt.Fprintf(c.stdout, "%d more messages: run warren inbox again\n", n)
	}
	return nil
}

// usageText shows token usage as "in/out/cached" ("" when there is none).
func usageText(u map[string]any) string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d/%d", num(u, "input_tokens"), num(u, "output_tokens"), num(u, "cached_input_tokens"))
}

func cmdProviders(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "providers")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, show, err := c.callOut(ctx, "daemon.providers", nil)
	if err != nil || !show {
		return err
	}
	rows := [][]string{}
	for _, p := range list(res, "providers") {
		key := "-"
		if env := str(p, "api_key_env"); env != "" {
			key = "$" + env + " unset"
			if b, _ := p["key_set"].(bool); b {
				key = "$" + env + " set"
			}
		}
		rows = append(rows, []string{str(p, "name"), str(p, "type"), dash(str(p, "base_url")), dash(str(p, "model")), key})
	}
	table(c.stdout, []string{"NAME", "TYPE", "BASE URL", "MODEL", "KEY"}, rows)
	return nil
}

func cmdAgentReset(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "agent reset")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	_, show, err := c.callOut(ctx, "agent.reset", map[string]any{"agent_id": pos[0]})
	if err != nil || !show {
		return err
	}
	fmt.Fprintf(c.stdout, "%s starts its next turn on a fresh context (its log keeps the earlier turns)\n", pos[0])
	return nil
}
