package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/quarantine"
)

// More of issue 16's recovery cases: every bit of a log flipped, what is an
// orphan, parents in quarantine, the USER inbox. Helpers in tamper_test.go.

// Every bit of a small agent log flipped in turn, then recovery: either
// the log is byte for byte what it was and the agent serves with every
// entry, or the agent is listed corrupt with the log untouched, or the
// cut bytes are kept beside it. Never an acknowledged entry silently gone,
// never the directory removed.
func TestBitFlipAtEveryPositionOfAnAgentLog(t *testing.T) {
	base := faultfs.NewMem()
	th := &tamperHome{t: t, fsys: base, home: "/home"}
	th.start()
	victim, err := th.c.CreateAgent(context.Background(), CreateSpec{Name: "v", Provider: "inproc", Model: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Send(context.Background(), victim, "x", "", "", nil); err != nil {
		t.Fatal(err)
	}
	th.stop()
	dir := th.c.agentDir(victim)
	files := map[string][]byte{}
	for _, p := range []string{"/home/user.jsonl", dir + "/session.json", dir + "/events.jsonl"} {
		b, err := faultfs.ReadFile(base, p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	orig := files[dir+"/events.jsonl"]
	want, err := eventlog.ReadAll(base, dir+"/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i := range orig {
		for bit := uint(0); bit < 8; bit++ {
			m := faultfs.NewMem()
			if err := m.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for p, b := range files {
				writeFile(t, m, p, b)
			}
			flipped := flip(orig, i, bit)
			writeFile(t, m, dir+"/events.jsonl", flipped)
			th := &tamperHome{t: t, fsys: m, home: "/home"}
			th.start()
			v, listed := th.view(victim)
			th.stop()
			if !listed {
				t.Fatalf("byte %d bit %d: the agent is gone (report %+v)", i, bit, th.rep)
			}
			after := dirState(t, m, dir)
			switch {
			case v.Status == "corrupt":
				if after["events.jsonl"] != string(flipped) {
					t.Fatalf("byte %d bit %d: corrupt, but its log was changed", i, bit)
				}
				counts["corrupt, untouched"]++
			case after["events.jsonl"] == string(orig):
				es, err := eventlog.ReadAll(m, dir+"/events.jsonl")
				if err != nil || len(es) < len(want) {
					t.Fatalf("byte %d bit %d: %d of %d entries, %v", i, bit, len(es), len(want), err)
				}
				counts["restored"]++
			default:
				before := map[string]string{"events.jsonl": string(flipped), "session.json": string(files[dir+"/session.json"])}
				if !preserved(before, after) {
					t.Fatalf("byte %d bit %d: status %s, the log changed and the cut bytes were not kept: %q", i, bit, v.Status, after)
				}
				counts["cut and kept"]++
			}
		}
	}
	t.Logf("%d flips of a %d-byte log: %v", 8*len(orig), len(orig), counts)
}

// Only what a crash during creation can leave is removed as an orphan: an
// empty directory, an empty log, an empty log with a torn pending file.
func TestOnlyProvablyEmptyDirectoriesAreOrphans(t *testing.T) {
	for name, files := range map[string]map[string][]byte{
		"empty directory":              {},
		"empty log":                    {"events.jsonl": nil},
		"empty log, torn pending file": {"events.jsonl": nil, "events.pending": []byte(`{"seq":1,"ts":"2026-`)},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.stop()
			dir := "/home/agents/" + strings.Repeat("cd", 16)
			if err := h.fs.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for f, b := range files {
				h.rewrite(dir+"/"+f, b)
			}
			h.start()
			if ok, _ := faultfs.Exists(h.fs, dir); ok {
				t.Fatal("the orphan directory was not removed")
			}
			if ok, _ := faultfs.Exists(h.fs, "/home/"+quarantine.Dir); ok {
				t.Fatal("an orphan was quarantined")
			}
		})
	}
}

// A child whose parent's directory is in quarantine is listed corrupt, not
// terminated: restoring the parent brings both back.
func TestChildOfAQuarantinedParentIsKept(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.stop()
	rootLog := h.c.logPath(root)
	saved := h.read(rootLog)
	h.rewrite(rootLog, nil) // the parent's log emptied beside its session.json
	h.start()
	if h.statusOf(kid) != "corrupt" {
		t.Fatalf("kid status %s, want corrupt", h.statusOf(kid))
	}
	h.restart()
	if h.statusOf(kid) != "corrupt" || h.count(kid, "agent.terminated") != 0 {
		t.Fatalf("after a restart: kid %s, %d agent.terminated", h.statusOf(kid), h.count(kid, "agent.terminated"))
	}
	// The operator restores the parent.
	h.stop()
	ents, err := h.fs.ReadDir("/home/" + quarantine.Dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("quarantine: %v %v", ents, err)
	}
	if err := h.fs.Rename("/home/"+quarantine.Dir+"/"+ents[0].Name(), h.c.agentDir(root)); err != nil {
		t.Fatal(err)
	}
	h.rewrite(rootLog, saved)
	h.start()
	if h.statusOf(root) != "idle" || h.statusOf(kid) != "idle" {
		t.Fatalf("after restoring the parent: root %s, kid %s", h.statusOf(root), h.statusOf(kid))
	}
}

// An emptied log with no snapshot looks like an orphan, but a child's
// agent.created proves the parent existed: quarantined, and the child kept.
func TestEmptiedParentWithoutSnapshotIsNotAnOrphan(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.stop()
	h.rewrite(h.c.logPath(root), nil)
	if err := h.fs.Remove(h.c.snapshotPath(root)); err != nil {
		t.Fatal(err)
	}
	h.start()
	if ok, _ := faultfs.Exists(h.fs, "/home/"+quarantine.Dir); !ok || h.c.Quarantined() != 1 {
		t.Fatal("the emptied parent was not quarantined")
	}
	if h.statusOf(kid) != "corrupt" || h.count(kid, "agent.terminated") != 0 {
		t.Fatalf("kid %s, %d agent.terminated; want corrupt and not terminated", h.statusOf(kid), h.count(kid, "agent.terminated"))
	}
}

// The USER inbox's log gets the same treatment: a link at user.jsonl is
// refused, naming it, and damage a crash cannot leave is reported with the
// file untouched (`warren repair USER`); the daemon starts and serves its
// agents beside the damaged inbox (SPEC 9).
func TestTamperedUserInboxIsNeverDestroyed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, fsys faultfs.FS, path string, log []byte)
		want   error
	}{
		{"symlinked user.jsonl", func(t *testing.T, fsys faultfs.FS, path string, log []byte) {
			writeFile(t, fsys, "/home/elsewhere.jsonl", log)
			if err := fsys.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := fsys.(faultfs.Symlinker).Symlink("/home/elsewhere.jsonl", path); err != nil {
				t.Fatal(err)
			}
		}, faultfs.ErrSymlink},
		{"CRLF line endings", func(t *testing.T, fsys faultfs.FS, path string, log []byte) {
			writeFile(t, fsys, path, bytes.ReplaceAll(log, []byte("\n"), []byte("\r\n")))
		}, eventlog.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := faultfs.NewMem()
			th := &tamperHome{t: t, fsys: m, home: "/home"}
			th.start()
			a, err := th.c.CreateAgent(context.Background(), CreateSpec{Name: "a", Provider: "inproc", Model: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := th.c.CallTool(context.Background(), a, "send_message", map[string]any{"recipient": "USER", "text": "hi"}); err != nil {
				t.Fatal(err)
			}
			th.stop()
			path := "/home/user.jsonl"
			log, err := faultfs.ReadFile(m, path)
			if err != nil || len(log) == 0 {
				t.Fatalf("user.jsonl: %q %v", log, err)
			}
			tc.tamper(t, m, path, log)
			before := dirState(t, m, "/home")
			c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: m, Home: "/home", Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})},
				DefaultProvider: "inproc", DefaultModel: "echo", Config: config.Default(), NoWake: true, Logger: hclog.NewNullLogger()}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Recover(context.Background()); err != nil {
				t.Fatalf("Recover = %v; want the daemon to start beside the damaged USER inbox", err)
			}
			if err := c.UserInboxDegraded(); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("UserInboxDegraded = %v, want %v naming %s", err, tc.want, path)
			}
			_ = c.Close(context.Background())
			if after := dirState(t, m, "/home"); !sameState(before, after) {
				t.Fatalf("the home's files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}
