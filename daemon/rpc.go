package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warren-dev/warren/console"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/notify"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/server"
	"github.com/warren-dev/warren/session"
)

// streamingMethods answer with frames, then done.
var streamingMethods = map[string]bool{"agent.stream": true, "events.subscribe": true}

// handler serves the RPC methods of SPEC 8.1.
type handler struct {
	c        *engine.Core
	home     string // absolute path of the home this daemon serves
	started  time.Time
	version  string
	pid      int
	shutdown func()
	cfg      *configState     // an invalid config.json, until fixed (nil in tests)
	notifier *notify.Notifier // nil: no notification sinks
	// front is the socket's handler for the daemon's life (front.go): the
	// cluster block of daemon.status reads the node and the store from it.
	front *front
	// console is the web console (nil: off) and consoleURL its address.
	console    *console.Console
	consoleURL string
	// drain is how long the stop lets running turns finish (daemon.shutdown's
	// drain_s, in nanoseconds); draining is set while it does, and new
	// sends, creates and resumes are refused (code 6) meanwhile.
	drain    atomic.Int64
	draining atomic.Bool
}

// refusedWhileDraining are the methods that would start work a draining
// daemon would only interrupt.
var refusedWhileDraining = map[string]bool{"agent.create": true, "agent.send": true, "agent.stream": true, "agent.resume": true}

type methodFunc func(h *handler, ctx context.Context, p protocol.Params, out server.Stream) (any, error)

var methods = map[string]methodFunc{
	"agent.create":      (*handler).create,
	"agent.list":        (*handler).list,
	"agent.inspect":     (*handler).inspect,
	"agent.send":        (*handler).send,
	"agent.stream":      (*handler).stream,
	"agent.terminate":   (*handler).terminate,
	"tool.call":         (*handler).toolCall,
	"inbox.list":        (*handler).inboxList,
	"agent.cancel":      (*handler).cancel,
	"agent.reset":       (*handler).reset,
	"agent.resume":      (*handler).resume,
	"agent.log":         (*handler).agentLog,
	"waits.list":        (*handler).waitsList,
	"events.subscribe":  (*handler).subscribe,
	"daemon.status":     (*handler).status,
	"notify.test":       (*handler).notifyTest,
	"notify.log":        (*handler).notifyLog,
	"console.pair":      (*handler).consolePair,
	"agent.budget":      (*handler).agentBudget,
	"console.revoke":    (*handler).consoleRevoke,
	"daemon.providers":  (*handler).providers,
	"daemon.shutdown":   (*handler).shutdownM,
	"workspace.log":     (*handler).workspaceLog,
	"workspace.restore": (*handler).workspaceRestore,
	"workspace.merge":   (*handler).workspaceMerge,
}

// Handle implements server.Handler.
func (h *handler) Handle(ctx context.Context, req *protocol.Request, out server.Stream) (any, error) {
	m, ok := methods[req.Method]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeUnknownMethod, "unknown method: %s", req.Method)
	}
	if req.Params.Has("credential") {
		// An agent process's request: done as its agent (agentauth.go).
		res, err := h.handleAsAgent(ctx, req, out)
		if err != nil {
			return nil, toRPCError(err)
		}
		return res, nil
	}
	if refusedWhileDraining[req.Method] && h.draining.Load() {
		return nil, protocol.Errorf(protocol.CodeUnavailable,
			"the daemon is stopping: it lets running turns finish and starts nothing new; send again once it has restarted (warren daemon start)")
	}
	res, err := m(h, ctx, req.Params, out)
	if err != nil {
		return nil, toRPCError(err)
	}
	return res, nil
}

// wireCodes maps the domain's errors to the wire codes of SPEC 8.1, the
// first match in the chain winning. This is the one place that knows the
// codes; the core returns sentinels (errors.go) wrapped with context.
var wireCodes = []struct {
	err  error
	code int
}{
	{engine.ErrNotFound, protocol.CodeNotFound},
	{engine.ErrTokenRejected, protocol.CodeTokenRejected},
	{engine.ErrUnavailable, protocol.CodeUnavailable},
	{engine.ErrInvalid, protocol.CodeInvalid},
	{engine.ErrWrongState, protocol.CodeInvalid},
}

// causeCodes map causes that reach the edge without a domain condition.
var causeCodes = []struct {
	err  error
	code int
}{
	{context.DeadlineExceeded, protocol.CodeUnavailable},
	{context.Canceled, protocol.CodeUnavailable},
	// The agent's log refuses appends until it heals: try again.
	{eventlog.ErrPoisoned, protocol.CodeUnavailable},
}

// toRPCError maps an error to the *protocol.Error sent on the wire: a
// domain condition first, then a protocol error (a bad param, found by
// protocol.Params at the edge), then the causes, else CodeInternal.
func toRPCError(err error) *protocol.Error {
	if err == nil {
		return nil
	}
	for _, m := range wireCodes {
		if errors.Is(err, m.err) {
			return &protocol.Error{Code: m.code, Message: err.Error()}
		}
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe != nil {
		return pe
	}
	for _, m := range causeCodes {
		if errors.Is(err, m.err) {
			return &protocol.Error{Code: m.code, Message: err.Error()}
		}
	}
	return &protocol.Error{Code: protocol.CodeInternal, Message: err.Error()}
}

// optStrings reads optional string params ("" when missing); a present
// param of another type is an error (code 2).
func optStrings(p protocol.Params, keys ...string) ([]string, error) {
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := p.OptString(k, "")
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// refAny is ref where a terminated agent resolves too.
func (h *handler) refAny(p protocol.Params, key string) (string, error) {
	ref, err := p.String(key)
	if err != nil {
		return "", err
	}
	return h.c.ResolveAny(ref)
}

func (h *handler) ref(p protocol.Params, key string) (string, error) {
	ref, err := p.String(key)
	if err != nil {
		return "", err
	}
	return h.c.Resolve(ref)
}

func (h *handler) create(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	name, err := p.String("name")
	if err != nil {
		return nil, err
	}
	opt, err := optStrings(p, "instructions", "provider", "model", "parent", "cwd")
	if err != nil {
		return nil, err
	}
	instr, prov, model, parentRef, cwd := opt[0], opt[1], opt[2], opt[3], opt[4]
	if err := checkCwd(cwd); err != nil {
		return nil, err
	}
	mdRaw, err := p.OptMap("metadata")
	if err != nil {
		return nil, err
	}
	md := map[string]string{}
	for k, v := range mdRaw {
		s, ok := v.(string)
		if !ok {
			return nil, protocol.Errorf(protocol.CodeInvalid, "param metadata.%s: expected a string, got %T", k, v)
		}
		md[k] = s
	}
	parent := ""
	if parentRef != "" {
		if parent, err = h.c.Resolve(parentRef); err != nil {
			return nil, err
		}
	}
	ws, err := workspaceParam(p)
	if err != nil {
		return nil, err
	}
	sandboxed, err := p.OptBool("sandbox", false)
	if err != nil {
		return nil, err
	}
	ch, err := budgetParams(p, "budget")
	if err != nil {
		return nil, err
	}
	var budget *schema.BudgetSetData
	if ch != nil {
		budget = &schema.BudgetSetData{Tokens: ch.Tokens, USD: ch.USD, Turns: ch.Turns, By: schema.ByOperator}
	}
	id, err := h.c.CreateAgent(ctx, engine.CreateSpec{Name: name, ParentID: parent, Instructions: instr,
		Provider: prov, Model: model, Metadata: md, Cwd: cwd, Workspace: ws, Sandbox: sandboxed, Budget: budget})
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "name": name}, nil
}

// list answers agent.list: the agents in tree order; with all, then the
// terminated ones (with terminated_at); with status (one status or several
// separated by commas), only those in it. A reply is one page (limit,
// default listPageLimit, and about 4 MiB): while more follow it carries next, which
// the client passes back as after (issue 31, D5: a whole deep tree no
// longer has to fit one reply).
func (h *handler) list(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	all, err := p.OptBool("all", false)
	if err != nil {
		return nil, err
	}
	want, err := statusFilter(p)
	if err != nil {
		return nil, err
	}
	lim, err := p.OptInt("limit", listPageLimit)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(int64(lim))
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param %v", err)
	}
	after, err := p.OptString("after", "")
	if err != nil {
		return nil, err
	}
	keep := func(s string) bool { return len(want) == 0 || want[s] }
	out := []any{}
	goneAfter, gone := strings.CutPrefix(after, goneCursor)
	if !gone {
		views, next := h.c.ListPage(after, limit, keep)
		sums := h.c.SubtreeSpends()
		for _, v := range views {
			m := listMap(v)
			if s, ok := sums[v.ID]; ok && s != v.Spent {
				m["subtree_spent"] = spentMap(s)
			}
			if b, left, ok := h.c.BudgetLeft(v.ID, sums[v.ID]); ok {
				m["budget"], m["remaining"] = budgetMap(b), left
			}
			out = append(out, m)
		}
		if next != "" {
			return map[string]any{"agents": out, "next": next}, nil
		}
	}
	if (all && keep("terminated")) || want["terminated"] {
		ended := h.c.TerminatedList(ctx)
		sort.Slice(ended, func(i, j int) bool { return ended[i].ID < ended[j].ID })
		for _, v := range ended {
			if gone && v.ID <= goneAfter {
				continue
			}
			if len(out) == limit {
				return map[string]any{"agents": out, "next": goneCursor + out[len(out)-1].(map[string]any)["agent_id"].(string)}, nil
			}
			out = append(out, goneMap(v))
		}
	}
	return map[string]any{"agents": out}, nil
}

// listPageLimit is agent.list's page when the client names none: every
// agent of a team at once (a page is also bounded in bytes).
const listPageLimit = 1000

// goneCursor marks a next cursor that falls among the terminated agents.
const goneCursor = "terminated:"

func (h *handler) inspect(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	since, limit, err := pageParams(p)
	if err != nil {
		return nil, err
	}
	d, err := h.c.InspectPage(ctx, id, since, limit)
	if err != nil {
		return nil, err
	}
	m := detailMap(d)
	sub := h.c.SubtreeSpent(d.ID)
	m["subtree_spent"] = spentMap(sub)
	if b, left, ok := h.c.BudgetLeft(d.ID, sub); ok {
		m["budget"] = budgetMap(b)
		m["remaining"] = left
	}
	return m, nil
}

func turnResultMap(agentID string, res engine.TurnResult) (map[string]any, error) {
	var m map[string]any
	switch {
	case res.Status == session.StatusSuspended:
		m = map[string]any{"status": "suspended", "run_id": res.RunID, "wait": turnWaitMap(res.Wait)}
		if res.Token != "" {
			m["token"] = res.Token
		}
	case res.Err != nil:
		return nil, res.Err
	case res.ResponseSeq > 0 && encodedLen(res.Response) > maxInlineResponse:
		// A completed turn is never reported as a failure: a response too
		// large for a reply frame (quoted in JSON) is given by reference,
		// to read with agent.log (issue 31, D13).
		m = map[string]any{"run_id": res.RunID, "status": res.Status, "response_bytes": len(res.Response),
			"response_ref": map[string]any{"agent_id": agentID, "seq": res.ResponseSeq}}
	default:
		m = map[string]any{"response": res.Response, "run_id": res.RunID, "status": res.Status}
	}
	if res.RevokedWait != nil {
		m["revoked_wait"] = map[string]any{"token_id": res.RevokedWait.TokenID, "kind": res.RevokedWait.Kind, "run_id": res.RevokedWait.RunID}
	}
	if res.AbandonedRun != "" {
		m["abandoned_run"] = res.AbandonedRun
	}
	return m, nil
}

// maxInlineResponse is the largest response, quoted as JSON, an
// agent.send reply carries itself: the rest of a frame is ample for the
// reply's other fields.
const maxInlineResponse = protocol.MaxFrame - 64<<10

// encodedLen is the length of s quoted as a JSON string (the larger of the
// two framings).
func encodedLen(s string) int {
	b, err := json.Marshal(s)
	if err != nil {
		return len(s) * 6
	}
	return len(b)
}

// agentMessage reads the agent_id and message params of send and stream.
func (h *handler) agentMessage(p protocol.Params) (id, msg string, err error) {
	if id, err = h.ref(p, "agent_id"); err != nil {
		return "", "", err
	}
	msg, err = p.String("message")
	return id, msg, err
}

func (h *handler) send(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, msg, err := h.agentMessage(p)
	if err != nil {
		return nil, err
	}
	opt, err := optStrings(p, "provider", "model")
	if err != nil {
		return nil, err
	}
	res, err := h.c.Send(ctx, id, msg, opt[0], opt[1], nil)
	if err != nil {
		return nil, err
	}
	return turnResultMap(id, res)
}

func (h *handler) stream(ctx context.Context, p protocol.Params, out server.Stream) (any, error) {
	id, msg, err := h.agentMessage(p)
	if err != nil {
		return nil, err
	}
	res, err := h.c.SendNotify(ctx, id, msg, "", "", func(s string) { _ = out.Chunk(s) },
		func(n engine.RetryNotice) { _ = out.Event(retryFrame(id, n)) })
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if res.Status == session.StatusSuspended {
		_ = out.Event(map[string]any{"event": schema.RunWaiting, "run_id": res.RunID, "token": res.Token, "wait": turnWaitMap(res.Wait)})
	}
	return nil, nil
}

// terminate answers agent.terminate; with recursive, the agent's subtree
// goes, deepest first. terminated lists what was terminated, in order.
func (h *handler) terminate(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	recursive, err := p.OptBool("recursive", false)
	if err != nil {
		return nil, err
	}
	var done []engine.TerminatedAgent
	if recursive {
		done, err = h.c.TerminateTree(ctx, id)
	} else {
		path := h.c.Path(id)
		if err = h.c.Terminate(ctx, id); err == nil {
			done = []engine.TerminatedAgent{{ID: id, Path: path}}
		}
	}
	if err != nil {
		return nil, err
	}
	list := make([]any, len(done))
	for i, d := range done {
		list[i] = map[string]any{"agent_id": d.ID, "path": d.Path}
	}
	return map[string]any{"agent_id": id, "status": "terminated", "terminated": list}, nil
}

func (h *handler) toolCall(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	tool, err := p.String("tool")
	if err != nil {
		return nil, err
	}
	args, err := p.OptMap("arguments")
	if err != nil {
		return nil, err
	}
	return h.c.CallTool(ctx, id, tool, args)
}

// maxWaitS bounds inbox.list's wait_s (an hour; a client that wants to
// wait longer asks again).
const maxWaitS = 3600

func (h *handler) inboxList(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	peek, err := p.OptBool("peek", false)
	if err != nil {
		return nil, err
	}
	waitS, err := p.OptInt("wait_s", 0)
	if err != nil {
		return nil, err
	}
	if waitS < 0 || waitS > maxWaitS {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param wait_s: must be 0 to %d seconds, got %d", maxWaitS, waitS)
	}
	if waitS > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(waitS)*time.Second)
		err := h.c.WaitUserMessage(wctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
	var msgs []engine.UserMessage
	if peek {
		msgs, err = h.c.PeekUserInbox(ctx)
	} else {
		msgs, err = h.c.DrainUserInbox(ctx)
	}
	if err != nil {
		return nil, err
	}
	out := make([]any, len(msgs))
	for i, m := range msgs {
		out[i] = map[string]any{"from": m.From, "text": m.Text, "message_id": m.MessageID,
			"timestamp": m.Timestamp.UTC().Format(time.RFC3339Nano)}
	}
	res := map[string]any{"messages": out}
	n := h.c.UserPendingCount()
	if peek {
		n -= len(msgs) // the shown ones stay in the inbox
	}
	if n > 0 {
		res["remaining"] = n // more than one reply carries: call again
	}
	return res, nil
}

func entryMap(agentID string, e eventlog.Entry) map[string]any {
	var data any
	if err := json.Unmarshal(e.Data, &data); err != nil {
		data = string(e.Data)
	}
	m := map[string]any{"seq": int64(e.Seq), "ts": e.TS.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"event": e.Event, "data": data}
	if agentID != "" {
		m["agent_id"] = agentID
	}
	return m
}

func (h *handler) agentLog(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	since, limit, err := pageParams(p)
	if err != nil {
		return nil, err
	}
	entries, more, err := h.c.LogPage(ctx, id, since+1, limit)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(entries))
	next := since
	for i, e := range entries {
		out[i] = entryMap("", e)
		next = e.Seq
	}
	return map[string]any{"events": out, "next_seq": int64(next), "more": more}, nil
}

// pageParams reads the paging params of agent.log and agent.inspect:
// since_seq (>= 0, default 0) and limit (pageLimit's default and bounds).
func pageParams(p protocol.Params) (since uint64, limit int, err error) {
	s, err := p.OptInt("since_seq", 0)
	if err != nil {
		return 0, 0, err
	}
	if s < 0 {
		return 0, 0, protocol.Errorf(protocol.CodeInvalid, "param since_seq: must be >= 0")
	}
	lim, err := p.OptInt("limit", 0)
	if err != nil {
		return 0, 0, err
	}
	limit, err = pageLimit(int64(lim))
	if err != nil {
		return 0, 0, protocol.Errorf(protocol.CodeInvalid, "param %v", err)
	}
	return uint64(s), limit, nil
}

// checkCwd validates agent.create's cwd: "" (the daemon's directory) or an
// absolute path of an existing directory (agent processes run there).
func checkCwd(cwd string) error {
	if cwd == "" {
		return nil
	}
	if !filepath.IsAbs(cwd) {
		return protocol.Errorf(protocol.CodeInvalid, "param cwd: %q is not an absolute path; pass the directory's full path", cwd)
	}
	st, err := os.Stat(cwd)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalid, "param cwd: %v; create the directory or pass another", err)
	}
	if !st.IsDir() {
		return protocol.Errorf(protocol.CodeInvalid, "param cwd: %s is not a directory", cwd)
	}
	return nil
}

// agentStatuses are the statuses agent.list's status param takes (SPEC 4).
var agentStatuses = []string{"idle", "running", "suspended", "interrupted_startup", "interrupted_waiting", "terminated", "corrupt"}

// statusFilter reads agent.list's status param: a status or several
// separated by commas (an empty set: "" or absent, every status).
func statusFilter(p protocol.Params) (map[string]bool, error) {
	raw, err := p.OptString("status", "")
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, s := range strings.Split(raw, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(agentStatuses, s) {
			return nil, protocol.Errorf(protocol.CodeInvalid, "param status: unknown status %q (one of %s)", s, strings.Join(agentStatuses, ", "))
		}
		want[s] = true
	}
	return want, nil
}

// pageLimit reads a page size param: the default when absent, an error
// when out of range.
func pageLimit(v int64) (int, error) {
	if v == 0 {
		return engine.DefaultPageLimit, nil
	}
	if v < 0 || v > engine.MaxPageLimit {
		return 0, fmt.Errorf("limit must be from 1 to %d", engine.MaxPageLimit)
	}
	return int(v), nil
}
