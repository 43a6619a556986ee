package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

func TestTurnStreamsTextAndPassesWarrensMCPServer(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	var usage provider.Usage
	c := newChunks()
	resp, err := s.Send(context.Background(), "@say hello\n@say  world", provider.TurnIO{OnChunk: c.add,
		OnUsage: func(u provider.Usage) { usage = usage.Add(u) }})
	if err != nil {
		t.Fatal(err)
	}
	if resp != "hello world" || c.text() != "hello world" || len(c.list) != 2 {
		t.Fatalf("response %q, chunks %q", resp, c.list)
	}
	if usage.InputTokens != 10 || usage.OutputTokens != 5 {
		t.Fatalf("usage %+v", usage)
	}
	init := e.received("initialize")[0]["params"].(map[string]any)
	if ci := init["clientInfo"].(map[string]any); ci["name"] != "warren" || ci["version"] == "" || ci["version"] == nil {
		t.Fatalf("clientInfo %v: OpenCode refuses an initialize without a version", ci)
	}
	news := e.received("session/new")
	if len(news) != 1 {
		t.Fatalf("%d session/new", len(news))
	}
	params := news[0]["params"].(map[string]any)
	servers := params["mcpServers"].([]any)
	srv := servers[0].(map[string]any)
	if srv["name"] != "warren" || srv["command"] != fakeAgentBin || srv["args"].([]any)[0] != "mcp-bridge" {
		t.Fatalf("mcp server %v", srv)
	}
	envs := map[string]string{}
	for _, v := range srv["env"].([]any) {
		kv := v.(map[string]any)
		envs[kv["name"].(string)] = kv["value"].(string)
	}
	if envs[provider.EnvSocket] != "/tmp/warren-test.sock" || envs[provider.EnvCredential] != "cred-1" {
		t.Fatalf("mcp env %v", envs)
	}
	if params["cwd"] != e.cwd {
		t.Fatalf("session/new cwd %v, want %s", params["cwd"], e.cwd)
	}
	if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", s.Pid())); err != nil || dir != e.cwd {
		t.Fatalf("the agent runs in %q (%v), want %s", dir, err, e.cwd)
	}
	if s.Handle() == "" {
		t.Fatal("no handle")
	}
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	groupGone(t, pid)
	if e.launch.ended != 1 {
		t.Fatalf("launch ended %d times", e.launch.ended)
	}
}

func TestToolCallReachesTheMCPServerWithTheCredential(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	resp, _ := send(t, s, `@tool send_message {"to":"bob","message":"hi"}`)
	for _, want := range []string{`"tool":"send_message"`, `"to":"bob"`, `"credential_set":true`, `"socket":"/tmp/warren-test.sock"`} {
		if !strings.Contains(resp, want) {
			t.Fatalf("response %q lacks %s", resp, want)
		}
	}
}

func TestModeIsSetAndAnUnknownModeIsAClearError(t *testing.T) {
	e := newEnv(t)
	e.st.Mode = "yolo"
	e.create()
	if got := e.received("session/set_mode"); len(got) != 1 {
		t.Fatalf("%d set_mode", len(got))
	}
	e2 := newEnv(t)
	e2.st.Mode = "nope"
	_, err := e2.provider().Create(context.Background(), e2.spec())
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "default, yolo") {
		t.Fatalf("err %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatal("a bad mode is not transient")
	}
	groupGone(t, e2.launch.started[0])
}

// restart creates a session, runs turns, stops it (as a daemon restart
// does) and restores it from its handle in a fresh process.
func restart(t *testing.T, e *env, prompts ...string) (*Session, error) {
	t.Helper()
	s := e.create()
	for _, p := range prompts {
		send(t, s, p)
	}
	h := s.Handle()
	_ = s.Stop()
	r, err := e.provider().Restore(context.Background(), e.spec(), nil, h)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r.(*Session), nil
}

func TestLoadDiscardsTheReplay(t *testing.T) {
	for _, after := range []bool{false, true} {
		name := "replay before the answer"
		vars := []string{}
		if after {
			name = "replay after the answer"
			vars = append(vars, "FAKEACP_REPLAY_AFTER=1")
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, vars...)
			s, err := restart(t, e, "first", "second")
			if err != nil {
				t.Fatal(err)
			}
			if s.RestoredBy() != MethodLoad {
				t.Fatalf("restored by %q", s.RestoredBy())
			}
			resp, c := send(t, s, "third")
			if resp != "turn 3: third" || c.text() != resp {
				t.Fatalf("response %q, streamed %q", resp, c.text())
			}
			if s.Discarded() != 4 {
				t.Fatalf("%d updates discarded, want the 4 replayed", s.Discarded())
			}
			if len(e.received("session/resume")) != 0 {
				t.Fatal("resume used though not advertised")
			}
		})
	}
}

func TestResumeWhenAdvertised(t *testing.T) {
	e := newEnv(t, "FAKEACP_RESUME=1")
	s, err := restart(t, e, "first")
	if err != nil {
		t.Fatal(err)
	}
	if s.RestoredBy() != MethodResume || len(e.received("session/load")) != 0 {
		t.Fatalf("restored by %q, %d loads", s.RestoredBy(), len(e.received("session/load")))
	}
	if resp, _ := send(t, s, "again"); resp != "turn 2: again" {
		t.Fatalf("response %q", resp)
	}
	if len(e.received("session/resume")[0]["params"].(map[string]any)["mcpServers"].([]any)) != 1 {
		t.Fatal("resume without warren's MCP server")
	}
}

func TestLoadFailureCannotRestore(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	h := s.Handle()
	_ = s.Stop()
	e.vars = append(e.vars, "FAKEACP_LOAD_FAIL=1")
	_, err := e.provider().Restore(context.Background(), e.spec(), nil, h)
	if !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("err %v, want ErrCannotRestore", err)
	}
	e.launch.mu.Lock()
	pid := e.launch.started[1]
	e.launch.mu.Unlock()
	groupGone(t, pid)
	// An agent with neither resume nor load cannot restore either.
	e2 := newEnv(t, "FAKEACP_NOLOAD=1")
	if _, err := restart(t, e2, "x"); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("no load: %v", err)
	}
}

func TestPermissionPolicies(t *testing.T) {
	cases := []struct{ policy, prompt, want string }{
		{PermAllow, "@permission rm -rf build", "selected allow"},
		{PermDeny, "@permission rm -rf build", "selected reject"},
		// A title alone never makes a warren tool (the shapes that do are
		// in warrentool_test.go).
		{PermDeny, "@permission mcp__warren__send_message", "selected reject"},
	}
	for _, tc := range cases {
		t.Run(tc.policy+" "+tc.prompt, func(t *testing.T) {
			e := newEnv(t)
			e.st.Permissions = tc.policy
			s := e.create()
			resp, _ := send(t, s, tc.prompt)
			if !strings.Contains(resp, tc.want) {
				t.Fatalf("response %q, want %q", resp, tc.want)
			}
		})
	}
}

func TestPermissionAskSuspendsThenTakesTheAnswer(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	suspend := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
		return nil, provider.ErrRunSuspended
	}}
	_, err := s.Send(context.Background(), "@permission deploy", provider.TurnIO{Tools: suspend})
	if !errors.Is(err, provider.ErrRunSuspended) {
		t.Fatalf("err %v", err)
	}
	call := suspend.calls[0]
	args := call["args"].(map[string]any)
	if call["tool"] != "await_input" || args["kind"] != WaitKind || args["timeout"] != PermissionWaitTimeout.Seconds() || !strings.Contains(args["prompt"].(string), `"deploy"`) {
		t.Fatalf("call %v", call)
	}
	if len(e.received("session/cancel")) != 1 {
		t.Fatal("no session/cancel after the suspension")
	}
	for answer, want := range map[string]string{"allow": "selected allow", "always": "selected always", "no": "selected reject"} {
		answered := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
			return map[string]any{"response": answer}, nil
		}}
		resp, err := s.Send(context.Background(), "@permission deploy", provider.TurnIO{Tools: answered})
		if err != nil || !strings.Contains(resp, want) {
			t.Fatalf("answer %q: %q, %v", answer, resp, err)
		}
	}
}

func TestCancelEndsTheTurnAndKeepsTheAgent(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	pid := s.Pid()
	ctx, cancel := context.WithCancel(context.Background())
	c := newChunks()
	go func() { <-c.first; cancel() }()
	_, err := s.Send(ctx, "@say started\n@hang", provider.TurnIO{OnChunk: c.add})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if resp, _ := send(t, s, "after"); resp != "turn 1: after" || s.Pid() != pid {
		t.Fatalf("the agent answered the cancel, so the session goes on in the same process: %q (pid %d, was %d)", resp, s.Pid(), pid)
	}
}

func TestSlowCancelKillsTheProcessGroup(t *testing.T) {
	e := newEnv(t, "FAKEACP_CHILD=1")
	e.opts.CancelGrace = 100 * time.Millisecond
	s := e.create()
	send(t, s, "one")
	pid := s.Pid()
	ctx, cancel := context.WithCancel(context.Background())
	c := newChunks()
	go func() { <-c.first; cancel() }()
	_, err := s.Send(ctx, "@say started\n@slowcancel", provider.TurnIO{OnChunk: c.add})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	groupGone(t, pid)
	// The next turn starts a fresh process and loads the session.
	if resp, _ := send(t, s, "next"); resp != "turn 2: next" || s.RestoredBy() != MethodLoad {
		t.Fatalf("response %q, restored by %q", resp, s.RestoredBy())
	}
}

func TestTurnTimeoutIsTransient(t *testing.T) {
	e := newEnv(t)
	e.st.Timeout = 200 * time.Millisecond
	s := e.create()
	_, err := s.Send(context.Background(), "@hang", provider.TurnIO{})
	if tr, _ := provider.IsTransient(err); !tr || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
}

func TestKilledAgentIsTransientAndComesBack(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	send(t, s, "one")
	pid := s.Pid()
	c := newChunks()
	go func() { <-c.first; _ = syscall.Kill(-pid, syscall.SIGKILL) }()
	_, err := s.Send(context.Background(), "@say working\n@hang", provider.TurnIO{OnChunk: c.add})
	if tr, _ := provider.IsTransient(err); !tr || !errors.Is(err, ErrAgentExited) {
		t.Fatalf("err %v", err)
	}
	groupGone(t, pid)
	if resp, _ := send(t, s, "two"); resp != "turn 2: two" {
		t.Fatalf("after the kill: %q", resp)
	}
}

func TestBadAgents(t *testing.T) {
	cases := []struct {
		name      string
		vars      []string
		prompt    string
		want      error
		transient bool
	}{
		{"non-JSON line", nil, "@say a\n@badjson\n@hang", ErrProtocol, false},
		{"answer to an id never sent", nil, "@wrongid\n@hang", ErrProtocol, false},
		{"crash mid-turn", nil, "@crash", ErrAgentExited, true},
		{"exit mid-turn", nil, "@say a\n@exit", ErrAgentExited, true},
		{"flood", nil, "@flood 5000", ErrFlood, false},
		{"line over the limit", nil, "@say " + strings.Repeat("y", 5000), ErrProtocol, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, append([]string{"FAKEACP_CHILD=1"}, tc.vars...)...)
			e.opts.MaxTurnUpdates = 1000
			e.opts.MaxLine = 4096
			e.opts.CancelGrace = 200 * time.Millisecond
			s := e.create()
			pid := s.Pid()
			_, err := s.Send(context.Background(), tc.prompt, provider.TurnIO{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tr, _ := provider.IsTransient(err); tr != tc.transient {
				t.Fatalf("transient %v for %v", tr, err)
			}
			if tc.want != ErrFlood {
				groupGone(t, pid)
			}
			_ = s.Stop()
			groupGone(t, pid)
		})
	}
}

func TestNeverAnswersInitialize(t *testing.T) {
	e := newEnv(t, "FAKEACP_NO_INIT=1", "FAKEACP_CHILD=1")
	e.opts.InitTimeout = 200 * time.Millisecond
	_, err := e.provider().Create(context.Background(), e.spec())
	if tr, _ := provider.IsTransient(err); !tr || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	groupGone(t, e.launch.started[0])
}

func TestFileSystemAndTerminalRequestsAreRefused(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	resp, _ := send(t, s, "@fs")
	if !strings.Contains(resp, "-32601") || !strings.Contains(resp, "fs/read_text_file") {
		t.Fatalf("response %q", resp)
	}
}

func TestMissingCommandSaysHowToInstall(t *testing.T) {
	e := newEnv(t)
	e.st.Command = []string{"/nonexistent/claude-agent-acp"}
	_, err := e.provider().Create(context.Background(), e.spec())
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install") {
		t.Fatalf("err %v", err)
	}
	e.st.Command = nil
	if _, err := e.provider().Create(context.Background(), e.spec()); !errors.Is(err, ErrNoCommand) {
		t.Fatalf("no command: %v", err)
	}
}

func TestSystemPromptOpensTheFirstPromptOnly(t *testing.T) {
	e := newEnv(t)
	spec := e.spec()
	spec.System = "You are the agent \"coder\"."
	ps, err := e.provider().Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	s := ps.(*Session)
	t.Cleanup(func() { _ = s.Stop() })
	for _, p := range []string{"one", "two"} {
		send(t, s, p)
	}
	prompts := e.received("session/prompt")
	text := func(i int) string {
		b := prompts[i]["params"].(map[string]any)["prompt"].([]any)[0].(map[string]any)
		return b["text"].(string)
	}
	if want := spec.System + "\n\n" + PreambleEnd + "\n\none"; text(0) != want {
		t.Fatalf("first prompt %q, want %q", text(0), want)
	}
	if text(1) != "two" {
		t.Fatalf("second prompt %q", text(1))
	}
}

func TestStderrGoesToTheLaunchWriterAndIntoErrors(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	send(t, s, "@stderr warming up\n@say ok")
	_, err := s.Send(context.Background(), "@stderr last words\n@crash", provider.TurnIO{})
	if !errors.Is(err, ErrAgentExited) || !strings.Contains(err.Error(), "last words") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err %v", err)
	}
	if got := e.launch.stderr.String(); !strings.Contains(got, "warming up\n") || !strings.Contains(got, "last words\n") {
		t.Fatalf("stderr writer got %q", got)
	}
}

func TestSuspendBlobRestoresTheSession(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	send(t, s, "one")
	blob, err := s.Suspend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	_ = s.Stop()
	groupGone(t, pid)
	r, err := e.provider().Restore(context.Background(), e.spec(), blob, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if resp, _ := send(t, r.(*Session), "two"); resp != "turn 2: two" {
		t.Fatalf("after restoring from the blob: %q", resp)
	}
}

func TestSettingsReloadApplyToTheNextTurn(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	policy := PermDeny
	o := e.opts
	o.Settings = func() Settings {
		mu.Lock()
		defer mu.Unlock()
		return Settings{Command: []string{fakeAgentBin}, Permissions: policy}
	}
	ps, err := New(o).Create(context.Background(), e.spec())
	if err != nil {
		t.Fatal(err)
	}
	s := ps.(*Session)
	t.Cleanup(func() { _ = s.Stop() })
	if resp, _ := send(t, s, "@permission rm x"); !strings.Contains(resp, "selected reject") {
		t.Fatalf("deny: %q", resp)
	}
	mu.Lock()
	policy = PermAllow
	mu.Unlock()
	if resp, _ := send(t, s, "@permission rm x"); !strings.Contains(resp, "selected allow") {
		t.Fatalf("after the reload: %q", resp)
	}
}

// A response over the message limit (Settings.MaxText, the config's
// limits.message_bytes) fails the turn with a permanent error naming the
// setting; the turn never holds more than the limit (issue 31 D3).
func TestResponseOverTheMessageLimitFails(t *testing.T) {
	e := newEnv(t)
	e.st.MaxText = 64 << 10
	e.opts.CancelGrace = 2 * time.Second
	s := e.create()
	got := 0
	_, err := s.Send(context.Background(), "@bigtext 1048576 16384", provider.TurnIO{OnChunk: func(c string) { got += len(c) }})
	if !errors.Is(err, ErrResponseTooLong) || !strings.Contains(err.Error(), "limits.message_bytes") || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("err %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatalf("transient: %v", err)
	}
	if got > 64<<10 {
		t.Fatalf("%d bytes of text went out, over the limit", got)
	}
	// Within the limit, the same agent answers.
	if resp, _ := send(t, s, "@bigtext 60000 16384"); len(resp) != 60000 {
		t.Fatalf("a response within the limit: %d bytes", len(resp))
	}
}

// A session id over MaxSessionID is refused at session/new (it would be
// logged whole as the session's handle).
func TestLongSessionIDIsRefused(t *testing.T) {
	e := newEnv(t, "FAKEACP_SESSION_ID_BYTES=100000")
	_, err := e.provider().Create(context.Background(), e.spec())
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "100000 bytes") || !strings.Contains(err.Error(), "256") {
		t.Fatalf("err %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatalf("transient: %v", err)
	}
	if len(err.Error()) > 1000 {
		t.Fatalf("the error is %d bytes: it quotes the id", len(err.Error()))
	}
	groupGone(t, e.launch.started[0])
	e2 := newEnv(t, "FAKEACP_SESSION_ID_BYTES=256")
	if s := e2.create(); len(s.Handle()) != 256 {
		t.Fatalf("handle of %d bytes", len(s.Handle()))
	}
}

// An agent's error message is quoted only up to a bound.
func TestLongRPCErrorIsCut(t *testing.T) {
	e := &RPCError{Code: -32000, Message: strings.Repeat("m", 1<<20)}
	if n := len(e.Error()); n > 5<<10 {
		t.Fatalf("error text of %d bytes", n)
	}
}
