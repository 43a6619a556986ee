// Package agentspec is what a provider session is told about its agent
// besides the instructions: the identity block the system prompt ends with
// (who the agent is in its tree and how messages and tools work), the
// identity fields for providers that pass them to their programs, the
// environment of the agent's processes, and the history mode. All are
// functions of the tree, the provider entry's config and the daemon's
// settings, computed when a session opens (so the prompt prefix stays the
// same for the life of the session).
package agentspec

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
)

// Tree is what is read of the agent tree (*tree.Tree has it).
type Tree interface {
	Name(id string) string
	Path(id string) string
	Parent(id string) (parentID string, ok bool)
	Children(id string) []string
}

// IdentityBlock is the block the system prompt ends with: who the agent is
// and how messages and tools work (README "Use a real model").
func IdentityBlock(t Tree, id string) string {
	name := t.Name(id)
	path := t.Path(id)
	if path == "" {
		path = name
	}
	var b strings.Builder
	b.WriteString("# Who you are (written by warren)\n")
	fmt.Fprintf(&b, "You are the agent %q (path %q, id %s) in a warren agent tree.\n", name, "/"+strings.TrimPrefix(path, "/"), id)
	if parent, ok := t.Parent(id); ok && parent != "" {
		fmt.Fprintf(&b, "Your parent is %q.\n", t.Name(parent))
	} else {
		b.WriteString("You are a root agent: you report to the operator, USER.\n")
	}
	var kids []string
	for _, ch := range t.Children(id) {
		kids = append(kids, fmt.Sprintf("%q", t.Name(ch)))
	}
	if len(kids) > 0 {
		fmt.Fprintf(&b, "Your children when this session began: %s (list_children shows them now).\n", strings.Join(kids, ", "))
	} else {
		b.WriteString("You have no children yet; spawn_agent creates one.\n")
	}
	b.WriteString("Messages from your parent, children, siblings, the operator (USER) and warren (SYSTEM) arrive as user messages " +
		"that begin \"Message from <name>:\".\n")
	b.WriteString("Your reply text goes only to whoever started the turn; to reach an agent, call send_message " +
		"(one hop: parent, children, siblings; a root agent can also message USER). " +
		"spawn_agent delegates to a new child, complete reports your result to your parent and ends you, " +
		"await_input asks the operator and waits. Tool results come back as JSON; {\"error\": ...} means the call failed.\n")
	return b.String()
}

// SystemPrompt is the instructions followed by the identity block.
func SystemPrompt(t Tree, id, instructions string) string {
	if strings.TrimSpace(instructions) == "" {
		return IdentityBlock(t, id)
	}
	return strings.TrimRight(instructions, "\n") + "\n\n" + IdentityBlock(t, id)
}

// HistoryModeKey is the agent metadata key, and the provider entry setting
// (config.json), that chooses how a structured-history provider passes the
// completed turns to a fresh process: "replay" (the default; the program
// re-executes them) or "context" (the program reads them as data). The
// agent's metadata wins over the entry's setting. It is read when a
// provider session opens. The provider refuses any other value with a
// permanent error naming it.
const HistoryModeKey = "history"

// HistoryMode is the history mode of an agent's sessions on a provider
// entry: the agent's metadata value when set (agentSet), else the entry's
// setting, else "".
func HistoryMode(agentValue string, agentSet bool, entry config.ProviderConfig) string {
	if agentSet {
		return agentValue
	}
	if v, ok := entry.Settings[HistoryModeKey].(string); ok {
		return v
	}
	return ""
}

// Identity is who the agent is in its tree, for providers that tell their
// programs (the scripted provider's first turn line).
func Identity(t Tree, id string) provider.Identity {
	in := provider.Identity{Name: t.Name(id), Path: t.Path(id)}
	if in.Path == "" {
		in.Path = in.Name
	}
	if parent, ok := t.Parent(id); ok && parent != "" {
		in.Parent, in.ParentID = t.Name(parent), parent
	}
	return in
}

// Env is the daemon's part of the agents' process environment.
type Env struct {
	// Environ is the daemon's environment env_pass settings read (nil:
	// os.Environ()).
	Environ []string
	// Extra is added for every agent process (KEY=VALUE).
	Extra []string
	// PythonPath goes first on PYTHONPATH (the scripted helper library).
	PythonPath string
	// SocketPath is WARREN_SOCKET.
	SocketPath string
}

// ProcessEnv is the environment the daemon adds for an agent's processes
// on provider entry pc: the entry's env_pass variables of the daemon's
// environment and its fixed env, the daemon-wide extras, the helper
// library first on PYTHONPATH, WARREN_AGENT_ID and WARREN_SOCKET (the
// provider adds the default allow-list).
func ProcessEnv(pc config.ProviderConfig, e Env, agentID string) []string {
	environ := e.Environ
	if environ == nil {
		environ = os.Environ()
	}
	fixed := make([]string, 0, len(pc.Env))
	for k, v := range pc.Env {
		fixed = append(fixed, k+"="+v)
	}
	sort.Strings(fixed)
	env := provider.MergeEnv(provider.PassEnv(environ, pc.EnvPass), fixed, e.Extra)
	if dir := e.PythonPath; dir != "" {
		pp := dir
		for _, kv := range env {
			if old, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok && old != "" {
				pp += string(filepath.ListSeparator) + old
			}
		}
		env = provider.MergeEnv(env, []string{"PYTHONPATH=" + pp})
	}
	own := []string{provider.EnvAgentID + "=" + agentID}
	if e.SocketPath != "" {
		own = append(own, provider.EnvSocket+"="+e.SocketPath)
	}
	return provider.MergeEnv(env, own)
}
