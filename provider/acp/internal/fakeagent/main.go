// Command fakeagent is a fake Agent Client Protocol agent for warren's
// tests, in the manner of Kandev's mock agent. It speaks ACP over stdio,
// keeps its sessions in $FAKEACP_STATE (so session/load works across
// processes), and is driven by its environment (process-wide behaviour)
// and by directive lines in each prompt (turn behaviour).
//
// Environment:
//
//	FAKEACP_STATE         directory of session files (default: a temp dir)
//	FAKEACP_LOG           append one JSON line per message received
//	FAKEACP_RESUME=1      advertise sessionCapabilities.resume
//	FAKEACP_NOLOAD=1      do not advertise loadSession
//	FAKEACP_LOAD_FAIL=1   answer session/load and session/resume with -32002
//	FAKEACP_LOAD_CRASH=1  exit (status 4) on session/load and session/resume
//	FAKEACP_REPLAY_AFTER=1 replay a loaded session after the load's answer
//	FAKEACP_NO_INIT=1     never answer initialize
//	FAKEACP_MODES=a,b     the modes offered (default "default,yolo")
//	FAKEACP_CHILD=1       start a child process in the agent's group
//	FAKEACP_TOOL_PERMISSION=SHAPE ask permission for warren's tool in an
//	                      adapter's shape (claude, codex, gemini; 1: claude)
//	                      before each @tool call (perm.go)
//	FAKEACP_SESSION_ID_BYTES=N answer session/new with a session id of N bytes
//
// Directives (lines of a prompt starting with '@'; a prompt wrapped in
// warren's history block is read from its current-request part):
//
//	@say TEXT            stream TEXT
//	@stderr TEXT         write TEXT to stderr
//	@tool NAME JSON      call tool NAME of the first MCP server over MCP
//	@permission TITLE    ask permission for a tool titled TITLE
//	@permission-as SHAPE ARG  ask in a real adapter's shape (perm.go)
//	@codexfail TEXT      report a failed model request as codex-acp does
//	                     (threadStatus systemError, then TEXT, end_turn)
//	@codexactive         codex-acp's threadStatus active (a recovery)
//	@hang                wait for session/cancel, then stop as cancelled
//	@slowcancel          ignore session/cancel and never answer
//	@crash / @exit       exit with status 3 / 0 mid-turn
//	@badjson             write a line that is not JSON
//	@wrongid             answer a request id that was never sent
//	@flood N             stream N one-byte chunks
//	@bigtext N SIZE      stream N bytes of text in chunks of SIZE bytes
//	@fs                  send fs/read_text_file and report the answer
//	@append FILE TEXT    append TEXT and a newline to FILE (relative to the
//	                     process's working directory: its workspace)
//
// warren's system prompt at the head of a first prompt (up to
// acp.PreambleEnd) is skipped. Without directives the answer is "turn N: PROMPT", N counting the
// session's turns (restored ones included).
//
// Run as "fakeagent mcp-bridge" it is a tiny MCP server whose tools/call
// answers with the tool, its arguments and which warren variables it got;
// "fakeagent sleeper" sleeps forever (the FAKEACP_CHILD child).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider/acp"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type turn struct {
	Prompt string `json:"prompt"`
	Reply  string `json:"reply"`
}

type sessionFile struct {
	Turns []turn `json:"turns"`
}

type agent struct {
	wmu     sync.Mutex
	out     *bufio.Writer
	state   string
	mu      sync.Mutex
	nextID  int
	waiting map[string]chan msg // our requests' answers
	cancel  map[string]chan struct{}
	mcp     map[string][]mcpServer // session -> servers
	perms   int                    // permission requests sent (their toolCallIds)
}

type mcpServer struct {
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "mcp-bridge":
			mcpMain()
			return
		case "sleeper":
			select {}
		}
	}
	state := os.Getenv("FAKEACP_STATE")
	if state == "" {
		state, _ = os.MkdirTemp("", "fakeacp")
	}
	if os.Getenv("FAKEACP_CHILD") == "1" {
		self, _ := os.Executable()
		_ = exec.Command(self, "sleeper").Start()
	}
	a := &agent{out: bufio.NewWriter(os.Stdout), state: state, waiting: map[string]chan msg{},
		cancel: map[string]chan struct{}{}, mcp: map[string][]mcpServer{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: bad input %q\n", sc.Text())
			continue
		}
		logMsg(m)
		a.serve(m)
	}
}

func logMsg(m msg) {
	path := os.Getenv("FAKEACP_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	data, _ := json.Marshal(m)
	_, _ = f.Write(append(data, '\n'))
}

func (a *agent) write(v any) {
	data, _ := json.Marshal(v)
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, _ = a.out.Write(append(data, '\n'))
	_ = a.out.Flush()
}

func (a *agent) raw(line string) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, _ = a.out.WriteString(line + "\n")
	_ = a.out.Flush()
}

func (a *agent) reply(id json.RawMessage, result any) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *agent) replyErr(id json.RawMessage, code int, text string) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": text}})
}

func (a *agent) update(sid string, upd map[string]any) {
	a.write(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid, "update": upd}})
}

func (a *agent) say(sid, text string) {
	a.update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
}

// request sends a request to the client and waits for its answer.
func (a *agent) request(method string, params any) msg {
	a.mu.Lock()
	a.nextID++
	id := fmt.Sprintf("\"a%d\"", a.nextID)
	ch := make(chan msg, 1)
	a.waiting[id] = ch
	a.mu.Unlock()
	a.write(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	return <-ch
}

func modes(current string) map[string]any {
	list := os.Getenv("FAKEACP_MODES")
	if list == "" {
		list = "default,yolo"
	}
	var avail []map[string]any
	for _, m := range strings.Split(list, ",") {
		avail = append(avail, map[string]any{"id": m, "name": m})
	}
	return map[string]any{"currentModeId": current, "availableModes": avail}
}

func (a *agent) serve(m msg) {
	if m.Method == "" {
		a.mu.Lock()
		ch := a.waiting[string(m.ID)]
		delete(a.waiting, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	var p struct {
		SessionID  string      `json:"sessionId"`
		Cwd        string      `json:"cwd"`
		MCPServers []mcpServer `json:"mcpServers"`
		ModeID     string      `json:"modeId"`
		Prompt     []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		if os.Getenv("FAKEACP_NO_INIT") == "1" {
			return
		}
		caps := map[string]any{"loadSession": os.Getenv("FAKEACP_NOLOAD") != "1"}
		if os.Getenv("FAKEACP_RESUME") == "1" {
			caps["sessionCapabilities"] = map[string]any{"resume": map[string]any{}}
		}
		a.reply(m.ID, map[string]any{"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": map[string]any{"name": "fakeagent"}})
	case "session/new":
		sid := newSessionID(len(a.mcp) + 1)
		a.save(sid, sessionFile{Turns: []turn{}})
		a.mu.Lock()
		a.mcp[sid] = p.MCPServers
		a.mu.Unlock()
		a.reply(m.ID, map[string]any{"sessionId": sid, "modes": modes("default")})
	case "session/load", "session/resume":
		if os.Getenv("FAKEACP_LOAD_CRASH") == "1" {
			os.Exit(4)
		}
		sf, ok := a.load(p.SessionID)
		if !ok || os.Getenv("FAKEACP_LOAD_FAIL") == "1" {
			a.replyErr(m.ID, -32002, "Resource not found: "+p.SessionID)
			return
		}
		a.mu.Lock()
		a.mcp[p.SessionID] = p.MCPServers
		a.mu.Unlock()
		replay := func() {
			for _, t := range sf.Turns {
				a.update(p.SessionID, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": t.Prompt}})
				a.say(p.SessionID, t.Reply)
			}
		}
		if m.Method == "session/load" && os.Getenv("FAKEACP_REPLAY_AFTER") != "1" {
			replay()
		}
		a.reply(m.ID, map[string]any{"modes": modes("default")})
		if m.Method == "session/load" && os.Getenv("FAKEACP_REPLAY_AFTER") == "1" {
			replay()
		}
	case "session/set_mode":
		for _, id := range strings.Split(modesList(), ",") {
			if id == p.ModeID {
				a.reply(m.ID, map[string]any{})
				return
			}
		}
		a.replyErr(m.ID, -32602, "unknown mode "+p.ModeID)
	case "session/cancel":
		a.mu.Lock()
		if ch := a.cancel[p.SessionID]; ch != nil {
			close(ch)
			delete(a.cancel, p.SessionID)
		}
		a.mu.Unlock()
	case "session/prompt":
		text := ""
		for _, b := range p.Prompt {
			text += b.Text
		}
		ch := make(chan struct{})
		a.mu.Lock()
		a.cancel[p.SessionID] = ch
		a.mu.Unlock()
		go a.prompt(m.ID, p.SessionID, text, ch)
	default:
		if len(m.ID) > 0 {
			a.replyErr(m.ID, -32601, "method not found: "+m.Method)
		}
	}
}

func modesList() string {
	if l := os.Getenv("FAKEACP_MODES"); l != "" {
		return l
	}
	return "default,yolo"
}

func (a *agent) path(sid string) string {
	return filepath.Join(a.state, filepath.Base(sid)+".json")
}

func (a *agent) load(sid string) (sessionFile, bool) {
	var sf sessionFile
	data, err := os.ReadFile(a.path(sid))
	if err != nil || json.Unmarshal(data, &sf) != nil {
		return sf, false
	}
	return sf, true
}

func (a *agent) save(sid string, sf sessionFile) {
	data, _ := json.Marshal(sf)
	_ = os.WriteFile(a.path(sid), data, 0o600)
}

// newSessionID is the id of the process's n-th session, padded to
// $FAKEACP_SESSION_ID_BYTES.
func newSessionID(n int) string {
	sid := fmt.Sprintf("fake-%d-%d", os.Getpid(), n)
	if size, err := strconv.Atoi(os.Getenv("FAKEACP_SESSION_ID_BYTES")); err == nil && size > len(sid) {
		sid += strings.Repeat("x", size-len(sid))
	}
	return sid
}

// prompt runs one turn: the "@verb arg" lines of the prompt are
// directives (directive), any other prompt is echoed.
func (a *agent) prompt(id json.RawMessage, sid, text string, cancel chan struct{}) {
	text, injected := promptText(text)
	sf, _ := a.load(sid)
	var reply strings.Builder
	out := func(s string) {
		a.say(sid, s)
		reply.WriteString(s)
	}
	directives := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "@") {
			continue
		}
		directives = true
		verb, arg, _ := strings.Cut(strings.TrimPrefix(line, "@"), " ")
		if a.directive(id, sid, verb, arg, cancel, out) {
			return
		}
	}
	if !directives {
		note := ""
		if injected {
			note = " (history injected)"
		}
		out(fmt.Sprintf("turn %d: %s%s", len(sf.Turns)+1, text, note))
	}
	sf.Turns = append(sf.Turns, turn{Prompt: text, Reply: reply.String()})
	a.save(sid, sf)
	a.mu.Lock()
	delete(a.cancel, sid)
	a.mu.Unlock()
	a.reply(id, map[string]any{"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 10, "outputTokens": 5}})
}

// promptText is the user's text of a prompt: after warren's preamble, and
// the current message alone when a history was injected (injected true).
func promptText(text string) (string, bool) {
	if i := strings.Index(text, acp.PreambleEnd); i >= 0 {
		text = strings.TrimSpace(text[i+len(acp.PreambleEnd):])
	}
	i := strings.Index(text, history.HeadingCurrent)
	if i < 0 {
		return text, false
	}
	text = text[i+len(history.HeadingCurrent):]
	if j := strings.Index(text, history.HeadingInstructions); j >= 0 {
		text = text[:j]
	}
	return strings.TrimSpace(text), true
}

// directive runs one "@verb arg" line of a prompt; true when it ended the
// turn itself (hang, answered as cancelled).
func (a *agent) directive(id json.RawMessage, sid, verb, arg string, cancel chan struct{}, out func(string)) bool {
	switch verb {
	case "say":
		out(arg)
	case "stderr":
		fmt.Fprintln(os.Stderr, arg)
	case "tool":
		name, args, _ := strings.Cut(arg, " ")
		if shape := os.Getenv("FAKEACP_TOOL_PERMISSION"); shape != "" {
			if shape == "1" {
				shape = "claude"
			}
			if !a.askPermissionAs(sid, shape, name, out) {
				return false
			}
		}
		out(a.callTool(sid, name, args))
	case "permission":
		a.askPermission(sid, arg, out)
	case "codexfail", "codexactive":
		a.codexStatus(sid, verb, arg, out)
	case "permission-as":
		shape, rest, _ := strings.Cut(arg, " ")
		a.askPermissionAs(sid, shape, rest, out)
	case "hang":
		<-cancel
		a.reply(id, map[string]any{"stopReason": "cancelled"})
		return true
	case "slowcancel":
		select {}
	case "crash":
		out("about to crash")
		os.Exit(3)
	case "exit":
		os.Exit(0)
	case "badjson":
		a.raw("this is not JSON")
	case "wrongid":
		a.write(map[string]any{"jsonrpc": "2.0", "id": 987654, "result": map[string]any{}})
	case "flood":
		n := 0
		fmt.Sscan(arg, &n)
		for i := 0; i < n; i++ {
			a.say(sid, "x")
		}
	case "bigtext":
		n, size := 0, 0
		fmt.Sscan(arg, &n, &size)
		chunk := strings.Repeat("b", max(size, 1))
		for sent := 0; sent < n; sent += len(chunk) {
			a.say(sid, chunk[:min(len(chunk), n-sent)])
		}
	case "fs":
		r := a.request("fs/read_text_file", map[string]any{"sessionId": sid, "path": "/etc/hostname"})
		out("fs answer: " + string(r.Error))
	case "append":
		file, text, _ := strings.Cut(arg, " ")
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = f.WriteString(text + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			out("append failed: " + err.Error())
		}
	}
	return false
}

// codexStatus is codex-acp's threadStatus: for codexfail its report of a
// failed model request (codexerr.go), then arg; for codexactive a
// recovery.
func (a *agent) codexStatus(sid, verb, arg string, out func(string)) {
	if verb == "codexactive" {
		a.update(sid, map[string]any{"sessionUpdate": "session_info_update",
			"_meta": map[string]any{"codex": map[string]any{"threadStatus": map[string]any{"type": "active", "activeFlags": []any{}}}}})
		return
	}
	a.update(sid, map[string]any{"sessionUpdate": "session_info_update",
		"_meta": map[string]any{"codex": map[string]any{"threadStatus": map[string]any{"type": "systemError"}}}})
	out(arg + "\n\n")
}

func (a *agent) askPermission(sid, title string, out func(string)) bool {
	r := a.request("session/request_permission", map[string]any{"sessionId": sid,
		"toolCall": map[string]any{"toolCallId": "tc1", "title": title, "kind": "execute"},
		"options": []map[string]any{{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
			{"optionId": "always", "name": "Always", "kind": "allow_always"},
			{"optionId": "reject", "name": "Reject", "kind": "reject_once"}}})
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(r.Result, &res)
	out(fmt.Sprintf("permission %s: %s %s;", title, res.Outcome.Outcome, res.Outcome.OptionID))
	return res.Outcome.OptionID == "allow" || res.Outcome.OptionID == "always"
}
