package engine

import (
	"context"
	"testing"
)

// A message from an agent that has since been terminated shows the sender's
// path, not its raw id, in the USER inbox and in inspect's inbox, also
// after a restart (issue 14).
func TestTerminatedSenderIsShownByPath(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	old := h.create("old", "", "echo")
	if r := h.tool(kid, "send_message", map[string]any{"recipient": "root", "text": "bye from kid"}); r["error"] != nil {
		t.Fatalf("send_message to root: %v", r)
	}
	if r := h.tool(old, "send_message", map[string]any{"recipient": "USER", "text": "bye from old"}); r["error"] != nil {
		t.Fatalf("send_message to USER: %v", r)
	}
	for _, id := range []string{kid, old} {
		if err := h.c.Terminate(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	senders := func() []string {
		t.Helper()
		ins, err := h.c.Inspect(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ins.Inbox {
			out = append(out, m.From)
		}
		return out
	}
	if got := senders(); len(got) != 1 || got[0] != "root/kid" {
		t.Fatalf("inspect root: inbox senders %q, want [root/kid]", got)
	}
	h.restart()
	if got := senders(); len(got) != 1 || got[0] != "root/kid" {
		t.Fatalf("after restart, inspect root: inbox senders %q, want [root/kid]", got)
	}
	msgs, err := h.c.DrainUserInbox(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].From != "old" {
		t.Fatalf("USER inbox %v, want one message from old", msgs)
	}
}

// A terminated agent's path is rebuilt through its terminated ancestors up
// to the first live one; an unknown id has none.
func TestRegistryPath(t *testing.T) {
	var r goneRegistry
	if got := r.Path("x", func(string) string { return "" }); got != "" {
		t.Fatalf("empty registry: path %q, want none", got)
	}
	r.Remember("w1", "w1", "lead")
	r.Remember("g1", "g1", "w1")
	live := func(id string) string {
		if id == "lead" {
			return "root/lead"
		}
		return ""
	}
	if got := r.Path("g1", live); got != "root/lead/w1/g1" {
		t.Fatalf("path %q, want root/lead/w1/g1", got)
	}
	r.Remember("orphan", "orphan", "unknown")
	if got := r.Path("orphan", live); got != "orphan" {
		t.Fatalf("path of an agent whose parent is unknown: %q, want orphan", got)
	}
	if !r.Has("w1") || r.Has("lead") {
		t.Fatal("Has: w1 is terminated, lead is not")
	}
	if u := r.Unread(); len(u) != 3 {
		t.Fatalf("unread %v, want 3 ids", u)
	}
	r.SetInfo("w1", &goneInfo{Provider: "p"})
	r.SetInfo("nobody", &goneInfo{})
	if u := r.Unread(); len(u) != 2 || len(r.All()) != 3 {
		t.Fatalf("after SetInfo: unread %v, all %v", u, r.All())
	}
}
