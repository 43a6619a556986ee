package agentspec

import (
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tree"
)

var (
	rID = strings.Repeat("a", 32)
	wID = strings.Repeat("b", 32)
	lID = strings.Repeat("c", 32)
)

func team(t *testing.T) *tree.Tree {
	t.Helper()
	tr := tree.New()
	for _, n := range []struct{ id, name, parent string }{{rID, "lead", ""}, {wID, "w1", rID}, {lID, "leaf", wID}} {
		if err := tr.Add(n.id, n.name, n.parent); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestIdentityTellsWhoAndWhere: a root is told it reports to USER, a child
// its parent and path, and both their children.
func TestIdentityTellsWhoAndWhere(t *testing.T) {
	tr := team(t)
	root := IdentityBlock(tr, rID)
	if !strings.Contains(root, `You are the agent "lead" (path "/lead", id `+rID+`)`) || !strings.Contains(root, "root agent") ||
		!strings.Contains(root, `Your children when this session began: "w1"`) {
		t.Fatalf("root's block:\n%s", root)
	}
	mid := IdentityBlock(tr, wID)
	if !strings.Contains(mid, `(path "/lead/w1", id `+wID+`)`) || !strings.Contains(mid, `Your parent is "lead".`) {
		t.Fatalf("child's block:\n%s", mid)
	}
	if got := SystemPrompt(tr, lID, "be brief\n\n"); !strings.HasPrefix(got, "be brief\n\n# Who you are") {
		t.Fatalf("system prompt: %q", got[:40])
	}
	if got := SystemPrompt(tr, lID, "  "); !strings.HasPrefix(got, "# Who you are") {
		t.Fatalf("system prompt without instructions: %q", got[:20])
	}
	if in := Identity(tr, lID); in != (provider.Identity{Name: "leaf", Path: "lead/w1/leaf", Parent: "w1", ParentID: wID}) {
		t.Fatalf("Identity = %+v", in)
	}
}

// TestHistoryModeAgentWins: the agent's metadata, then the entry's setting.
func TestHistoryModeAgentWins(t *testing.T) {
	entry := config.ProviderConfig{Settings: map[string]any{HistoryModeKey: "context"}}
	if m := HistoryMode("replay", true, entry); m != "replay" {
		t.Fatalf("agent set: %q", m)
	}
	if m := HistoryMode("", false, entry); m != "context" {
		t.Fatalf("entry set: %q", m)
	}
	if m := HistoryMode("", false, config.ProviderConfig{}); m != "" {
		t.Fatalf("neither: %q", m)
	}
}

// TestProcessEnv: passed and fixed variables, the extras, the helper
// library first on PYTHONPATH, and the agent's own variables last.
func TestProcessEnv(t *testing.T) {
	pc := config.ProviderConfig{EnvPass: []string{"OPENAI_*"}, Env: map[string]string{"B": "2", "A": "1"}}
	env := ProcessEnv(pc, Env{Environ: []string{"OPENAI_KEY=k", "SECRET=s", "PYTHONPATH=/old"}, Extra: []string{"X=1"},
		PythonPath: "/py", SocketPath: "/home/daemon.sock"}, "agent1")
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["OPENAI_KEY"] != "k" || got["SECRET"] != "" || got["A"] != "1" || got["B"] != "2" || got["X"] != "1" {
		t.Fatalf("env %v", env)
	}
	if got["PYTHONPATH"] != "/py" || got[provider.EnvAgentID] != "agent1" || got[provider.EnvSocket] != "/home/daemon.sock" {
		t.Fatalf("env %v", env)
	}
}
