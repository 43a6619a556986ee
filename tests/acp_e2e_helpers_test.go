package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/llmfake"
)

// The real agent CLIs over ACP (WARREN_E2E=1, after scripts/e2e-install.sh):
// each runs as a built-in acp entry (claude, codex, gemini, opencode) whose
// config.json entry sets the installed command and points the agent at a
// fake LLM server speaking the agent's own API. Keys are dummies, in the
// daemon's environment (config.json refuses them); the built-in entries
// pass them through (ANTHROPIC_*, CODEX_*, GEMINI_*, OPENCODE_*).
//
// WARREN_E2E_EXCLUDE (comma-separated: claude, codex, gemini, opencode)
// excludes agents by name; an excluded agent's test says so and skips.
// Every other failure to run (not installed, no result) fails.

// e2eAgent is one agent CLI under test.
type e2eAgent struct {
	name  string // the built-in entry
	pkg   string // npm package, pinned in scripts/e2e-install.sh
	bin   string // the installed binary's name
	api   llmfake.API
	model string // agent.create's model ("" for the entry's)
	// perms is the entry's permissions policy ("" for the default, ask:
	// every agent's permission request for warren's own tool is
	// recognised, provider/acp/warrentool.go, so the send_message turn
	// passes under ask only if it is).
	perms   string
	command func(bin string) []string
	// persisted, when set, says whether the agent has written its session
	// (handle) to its own storage under dir. Gemini CLI writes its chat
	// file some time after the turn's answer: a kill -9 before that loses
	// the session (the restore then falls back to the history).
	persisted func(dir, handle string) bool
	// restoreBug explains a known failure of the agent's native restore.
	restoreBug string
	// noUsage: the agent reports no token usage over ACP (its turns are
	// counted, not its tokens; SPEC 13).
	noUsage bool
	// sameMinuteLoad: the agent's session/load fails when it runs in the
	// same UTC minute as the session's creation (gemini-cli 0.61.0; see
	// restoreBug), and warren falls back to the history.
	sameMinuteLoad bool
	// setup writes the agent's files under dir, sets its dummy key in the
	// test's environment and returns the entry's env.
	setup func(t *testing.T, f *llmfake.Server, dir string) map[string]string
}

var e2eAgents = []e2eAgent{
	{name: "claude", pkg: "@agentclientprotocol/claude-agent-acp", bin: "claude-agent-acp", api: llmfake.Anthropic,
		command: func(bin string) []string { return []string{bin} },
		setup: func(t *testing.T, f *llmfake.Server, dir string) map[string]string {
			t.Setenv("ANTHROPIC_API_KEY", "e2e-dummy-key")
			return map[string]string{"ANTHROPIC_BASE_URL": f.URL, "ANTHROPIC_MODEL": "claude-fake-1",
				"HOME": dir, "CLAUDE_CONFIG_DIR": filepath.Join(dir, ".claude"), "DISABLE_AUTOUPDATER": "1",
				// MCP tools offered up front, not behind ToolSearch (the fake
				// model does not search).
				"ENABLE_TOOL_SEARCH": "false"}
		}},
	{name: "codex", pkg: "@agentclientprotocol/codex-acp", bin: "codex-acp", api: llmfake.Responses,
		command: func(bin string) []string { return []string{bin} },
		setup: func(t *testing.T, f *llmfake.Server, dir string) map[string]string {
			t.Setenv("CODEX_E2E_API_KEY", "e2e-dummy-key")
			home := filepath.Join(dir, ".codex")
			writeFile(t, filepath.Join(home, "config.toml"), `model = "mock-model"
model_provider = "mock"
[model_providers.mock]
name = "mock"
base_url = "`+f.BaseURL()+`"
env_key = "CODEX_E2E_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`)
			return map[string]string{"CODEX_HOME": home, "HOME": dir}
		}},
	{name: "gemini", pkg: "@google/gemini-cli", bin: "gemini", api: llmfake.Gemini, model: "mock-model",
		sameMinuteLoad: true, noUsage: true,
		restoreBug: "gemini-cli 0.61.0's session/load (GeminiAgent.loadSession) first builds the session's config, whose " +
			"initialize starts a ChatRecordingService for the loaded id as a new session: it names its file " +
			"session-<UTC minute>-<id8>.jsonl, which in the minute the session was created is the session's own file, and " +
			"appends a new header and {\"$set\":{\"messages\":[<session_context>]}}; SessionSelector.resolveSession then " +
			"finds no resumable message and the load answers -32603 \"No previous sessions found for this project.\" " +
			"(the session is lost for good). In a later minute the recorder writes a file of its own and the load works",
		command: func(bin string) []string { return []string{bin, "--acp", "--skip-trust"} },
		persisted: func(dir, handle string) bool {
			files, _ := filepath.Glob(filepath.Join(dir, ".gemini", "tmp", "*", "chats", "session-*-"+handle[:min(8, len(handle))]+".jsonl"))
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), handle) && strings.Contains(string(b), "E2E-") {
					return true
				}
			}
			return false
		},
		setup: func(t *testing.T, f *llmfake.Server, dir string) map[string]string {
			t.Setenv("GEMINI_API_KEY", "e2e-dummy-key")
			writeFile(t, filepath.Join(dir, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1,"sessionRetention":{"enabled":false}}}`)
			return map[string]string{"GOOGLE_GEMINI_BASE_URL": f.URL, "HOME": dir}
		}},
	{name: "opencode", pkg: "opencode-ai", bin: "opencode", api: llmfake.OpenAI,
		command: func(bin string) []string { return []string{bin, "acp"} },
		setup: func(t *testing.T, f *llmfake.Server, dir string) map[string]string {
			t.Setenv("OPENCODE_E2E_API_KEY", "e2e-dummy-key")
			cfg, _ := json.Marshal(map[string]any{
				"provider": map[string]any{"mock": map[string]any{"npm": "@ai-sdk/openai-compatible",
					"options": map[string]any{"baseURL": f.BaseURL(), "apiKey": "{env:OPENCODE_E2E_API_KEY}"},
					"models":  map[string]any{"mock-model": map[string]any{"tool_call": true}}}},
				"model": "mock/mock-model", "small_model": "mock/mock-model"})
			return map[string]string{"OPENCODE_CONFIG_CONTENT": string(cfg), "OPENCODE_DISABLE_MODELS_FETCH": "1",
				"HOME": dir, "XDG_DATA_HOME": filepath.Join(dir, ".data"), "XDG_CONFIG_HOME": filepath.Join(dir, ".config"),
				"XDG_CACHE_HOME": filepath.Join(dir, ".cache"), "XDG_STATE_HOME": filepath.Join(dir, ".state")}
		}},
}

// expectRestore is the restore strategy the agent must use after a
// restart: "native", or for an agent with sameMinuteLoad "history" when
// the load surely runs in the minute the session was made (made spans
// the first turn), "native" when surely later, "" (either) near a minute's
// edge.
func (a e2eAgent) expectRestore(made [2]time.Time, now time.Time) string {
	if !a.sameMinuteLoad {
		return "native"
	}
	minute := func(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }
	switch {
	case minute(now).After(minute(made[1])):
		return "native"
	case minute(made[0]).Equal(minute(now)) && now.UTC().Second() < 30:
		return "history"
	}
	return ""
}

func e2eAgentNamed(name string) e2eAgent {
	for _, a := range e2eAgents {
		if a.name == name {
			return a
		}
	}
	panic("no e2e agent " + name)
}

// e2eAgentBin returns the agent's installed binary, skipping without
// WARREN_E2E=1 or when WARREN_E2E_EXCLUDE names the agent, failing when
// it is not installed.
func e2eAgentBin(t *testing.T, a e2eAgent) string {
	t.Helper()
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh) to run the real agent CLIs")
	}
	for _, x := range strings.Split(os.Getenv("WARREN_E2E_EXCLUDE"), ",") {
		if strings.TrimSpace(x) == a.name {
			t.Skipf("EXCLUDED: WARREN_E2E_EXCLUDE names %s; this agent was not tested", a.name)
		}
	}
	bin := e2ePath("node_modules", ".bin", a.bin)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s (%s) not found at %s: run scripts/e2e-install.sh, or exclude it with WARREN_E2E_EXCLUDE=%s: %v", a.bin, a.pkg, bin, a.name, err)
	}
	return bin
}

// e2ePath is a path under the e2e install directory: $WARREN_E2E_DIR,
// else .e2e/ in the repository (scripts/e2e-install.sh's default).
func e2ePath(elem ...string) string {
	dir := os.Getenv("WARREN_E2E_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../.e2e")
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeACPConfig writes config.json with the agents' entries.
func writeACPConfig(t *testing.T, d *testDaemon, entries map[string]map[string]any) {
	t.Helper()
	writeFile(t, filepath.Join(d.Home, "config.json"), mustJSON(t, map[string]any{"providers": entries}))
}

// e2eEntry sets up agent a in front of f and returns its config entry.
func e2eEntry(t *testing.T, a e2eAgent, bin string, f *llmfake.Server, dir string) map[string]any {
	t.Helper()
	e := map[string]any{"command": a.command(bin), "env": a.setup(t, f, dir)}
	if a.perms != "" {
		e["permissions"] = a.perms
	}
	return e
}

// e2eModel is a fake model driven by the prompt of the current turn (the
// last user message with "E2E-" in it): after a tool result that follows
// the prompt it answers "done: <result>"; a prompt with CALLTOOL calls
// warren's send_message (under the agent's naming) with the args the
// test set; a prompt with STALL stalls the stream until the client goes
// away; any other prompt gets "ok: <marker>". Requests that offer no
// send_message tool (OpenCode's title request, Gemini's side calls) get a
// short text.
type e2eModel struct {
	mu       sync.Mutex
	args     string        // send_message's args
	stalled  chan struct{} // a value per stalled request
	calls    int           // send_message calls the model made
	prompts  []string      // the prompt of each request that offered the tool
	requests []llmfake.Request
	other    []llmfake.Request // requests that offered no send_message
}

// otherTools describes the requests that offered no send_message (for
// failure texts).
func (m *e2eModel) otherTools() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, r := range m.other {
		fmt.Fprintf(&b, "%s offered %v\n", r.Path, r.Tools())
	}
	return b.String()
}

func newE2EModel(args string) *e2eModel {
	return &e2eModel{args: args, stalled: make(chan struct{}, 16)}
}

func (m *e2eModel) respond(r llmfake.Request) llmfake.Reply {
	tool, ok := r.Tool("send_message")
	if !ok {
		m.mu.Lock()
		m.other = append(m.other, r)
		m.mu.Unlock()
		return llmfake.Reply{Text: "E2E title"}
	}
	_, msgs := r.Messages()
	pi := -1
	for i, msg := range msgs {
		if msg.Role == "user" && strings.Contains(msg.Text, "E2E-") {
			pi = i
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, r)
	if pi < 0 {
		m.prompts = append(m.prompts, "")
		return llmfake.Reply{Text: "no E2E prompt in the request"}
	}
	// The current request is the text from its last marker on: a history
	// block warren injects (after a failed native restore) quotes earlier
	// prompts before it, and their directives are not this turn's.
	prompt := msgs[pi].Text
	prompt = prompt[strings.LastIndex(prompt, "E2E-"):]
	m.prompts = append(m.prompts, prompt)
	for _, msg := range msgs[pi+1:] {
		if msg.Role == "tool" {
			return llmfake.Reply{Text: fmt.Sprintf("done: %.200s", strings.TrimSpace(msg.Text)), Chunk: 16}
		}
	}
	switch {
	case strings.Contains(prompt, "CALLTOOL"):
		m.calls++
		return llmfake.Reply{Calls: []llmfake.Call{tool.Call(fmt.Sprintf("call_e2e_%d", m.calls), m.args)}}
	case strings.Contains(prompt, "STALL"):
		m.stalled <- struct{}{}
		return llmfake.Reply{Text: "this answer never ends", Stall: true, StallAfter: 2}
	}
	return llmfake.Reply{Text: fmt.Sprintf("ok: %.20s", prompt)}
}

// lastRequest is the last request that offered warren's tool.
func (m *e2eModel) lastRequest() llmfake.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) == 0 {
		return llmfake.Request{}
	}
	return m.requests[len(m.requests)-1]
}

// earlierUserText says whether a user message before the request's last
// one contains s: the agent sent an earlier turn itself (native context),
// not as an injected history block inside the new prompt.
func earlierUserText(r llmfake.Request, s string) bool {
	_, msgs := r.Messages()
	last := -1
	for i, m := range msgs {
		if m.Role == "user" && strings.Contains(m.Text, "E2E-") {
			last = i
		}
	}
	for i := 0; i < last; i++ {
		if msgs[i].Role == "user" && strings.Contains(msgs[i].Text, s) {
			return true
		}
	}
	return false
}

// createAgentIn creates an agent with a working directory.
func createAgentIn(t *testing.T, d *testDaemon, name, prov, model, parent, cwd string) string {
	t.Helper()
	p := map[string]any{"name": name, "instructions": "e2e agent " + name, "provider": prov, "model": model, "cwd": cwd}
	if parent != "" {
		p["parent"] = parent
	}
	id, _ := d.callN("agent.create", p)["agent_id"].(string)
	if len(id) != 32 {
		t.Fatalf("agent.create %s: agent_id %q", name, id)
	}
	return id
}

// eventsNamed returns the data of an agent's log entries named ev.
func eventsNamed(t *testing.T, d *testDaemon, id, ev string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range logEvents(t, d, id) {
		if e["event"] == ev {
			data, _ := e["data"].(map[string]any)
			out = append(out, data)
		}
	}
	return out
}

// agentStderr is the tail of an agent's stderr file (for failure texts).
func agentStderr(d *testDaemon, id string) string {
	b, _ := os.ReadFile(filepath.Join(d.Home, "agents", id, "stderr.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
