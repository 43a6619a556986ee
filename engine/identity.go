package engine

import (
	"fmt"
	"strings"

	"github.com/warren-dev/warren/provider"
)

// checkModel fills spec's model from the entry's default and refuses an HTTP
// entry with neither (SPEC 7, code 2).
func (c *Core) checkModel(provName string, model *string) error {
	if *model != "" {
		return nil
	}
	*model = c.providers.DefaultModel(provName)
	if *model == "" && c.providers.IsHTTP(provName) {
		return failf(ErrInvalid,
			"provider entry %q has no default model and none was given: pass --model (e.g. --model gpt-4o-mini), or set \"providers\": {%q: {\"model\": \"...\"}} in config.json",
			provName, provName)
	}
	return nil
}

// checkServed refuses a model the provider can know is invalid before any
// run (an unknown inproc program, a missing script): SPEC 7, code 2 naming
// the model.
func checkServed(prov provider.Provider, provName, model string) error {
	if model == "" {
		return nil
	}
	if mc, ok := prov.(provider.ModelChecker); ok {
		if err := mc.CheckModel(model); err != nil {
			return failf(ErrInvalid, "provider %q does not serve model %q: %w", provName, model, err)
		}
	}
	return nil
}

// identity is the block the system prompt ends with: who the agent is and
// how messages and tools work (README "Use a real model"). It is computed
// when a provider session opens, so the prompt prefix stays the same for
// the life of the session.
func (c *Core) identity(id string) string {
	name := c.tree.Name(id)
	path := c.tree.Path(id)
	if path == "" {
		path = name
	}
	var b strings.Builder
	b.WriteString("# Who you are (written by warren)\n")
	fmt.Fprintf(&b, "You are the agent %q (path %q, id %s) in a warren agent tree.\n", name, "/"+strings.TrimPrefix(path, "/"), id)
	if parent, ok := c.tree.Parent(id); ok && parent != "" {
		fmt.Fprintf(&b, "Your parent is %q.\n", c.tree.Name(parent))
	} else {
		b.WriteString("You are a root agent: you report to the operator, USER.\n")
	}
	var kids []string
	for _, ch := range c.tree.Children(id) {
		kids = append(kids, fmt.Sprintf("%q", c.tree.Name(ch)))
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

// systemPrompt is the instructions followed by the identity block.
func (c *Core) systemPrompt(id, instructions string) string {
	if strings.TrimSpace(instructions) == "" {
		return c.identity(id)
	}
	return strings.TrimRight(instructions, "\n") + "\n\n" + c.identity(id)
}
