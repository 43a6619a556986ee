package daemon

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// Issue 16: recovery never destroys what it cannot prove was
// unacknowledged. Each case tampers with an agent's files while the daemon
// is down; after recovery the agent is either listed corrupt with its
// files untouched, or its directory is in <home>/quarantine whole, or (a
// snapshot that is a link) it is healthy with the link kept aside. Nothing
// is deleted, no link is followed, and the other agent serves.

// tamperHome is a home on fsys with one core at a time.
type tamperHome struct {
	t    *testing.T
	fsys faultfs.FS
	home string
	c    *Core
	rep  RecoveryReport
}

func (th *tamperHome) start() {
	th.t.Helper()
	c, err := NewCore(CoreOptions{FS: th.fsys, Home: th.home,
		Providers:       map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
		DefaultProvider: "inproc", DefaultModel: "echo", Config: config.Default(), NoWake: true,
		Logger: hclog.NewNullLogger(), SessionSaveDelay: time.Millisecond})
	if err != nil {
		th.t.Fatal(err)
	}
	rep, err := c.Recover()
	if err != nil {
		th.t.Fatalf("Recover: %v", err)
	}
	th.c, th.rep = c, rep
}

func (th *tamperHome) stop() {
	th.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := th.c.Close(ctx); err != nil {
		th.t.Fatal(err)
	}
}

func (th *tamperHome) view(id string) (AgentView, bool) {
	for _, v := range th.c.List() {
		if v.ID == id {
			return v, true
		}
	}
	return AgentView{}, false
}

// dirState is a directory's files (their bytes) and links ("link").
func dirState(t *testing.T, fsys faultfs.FS, dir string) map[string]string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			out[e.Name()] = "link"
			continue
		}
		b, err := faultfs.ReadFileNoFollow(fsys, p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// preserved reports whether after holds every byte of before: the same
// files, except that bytes cut from the end of events.jsonl may sit in one
// events.jsonl.torn-* copy beside it.
func preserved(before, after map[string]string) bool {
	log := after["events.jsonl"]
	extra := 0
	for name, content := range after {
		if strings.HasPrefix(name, "events.jsonl.torn-") {
			log += content
			extra++
		}
	}
	if extra > 1 || len(after) != len(before)+extra || log != before["events.jsonl"] {
		return false
	}
	for k, v := range before {
		if k != "events.jsonl" && after[k] != v {
			return false
		}
	}
	return true
}

func sameState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func writeFile(t *testing.T, fsys faultfs.FS, p string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flip returns b with one bit of byte i flipped.
func flip(b []byte, i int, bit uint) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1 << bit
	return c
}

type outcome int

const (
	corruptUntouched outcome = iota // listed corrupt, files unchanged
	quarantined                     // directory moved whole to <home>/quarantine
	healthyLinkKept                 // serves; session.json link moved aside, target untouched
)

func TestTamperedAgentFilesAreNeverDestroyed(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, fsys faultfs.FS, dir string, log []byte)
		want   outcome
	}{
		{"zero-filled log", func(t *testing.T, fsys faultfs.FS, dir string, log []byte) {
			writeFile(t, fsys, dir+"/events.jsonl", make([]byte, len(log)))
		}, quarantined}, // the zeros have no newline: a torn tail, cut and kept; then no agent.created
		{"CRLF line endings", func(t *testing.T, fsys faultfs.FS, dir string, log []byte) {
			writeFile(t, fsys, dir+"/events.jsonl", bytes.ReplaceAll(log, []byte("\n"), []byte("\r\n")))
		}, corruptUntouched},
		{"one flipped bit in a one-line log", func(t *testing.T, fsys faultfs.FS, dir string, log []byte) {
			first := log[:bytes.IndexByte(log, '\n')+1]
			writeFile(t, fsys, dir+"/events.jsonl", flip(first, len(first)/2, 3))
		}, corruptUntouched},
		{"three complete lines with bad crcs at the end", func(t *testing.T, fsys faultfs.FS, dir string, log []byte) {
			lines := bytes.SplitAfter(log, []byte("\n"))
			lines = lines[:len(lines)-1] // the empty piece after the last newline
			for i := len(lines) - 3; i < len(lines); i++ {
				lines[i] = flip(lines[i], 12, 0)
			}
			writeFile(t, fsys, dir+"/events.jsonl", bytes.Join(lines, nil))
		}, corruptUntouched},
		{"empty events.jsonl beside a valid session.json", func(t *testing.T, fsys faultfs.FS, dir string, _ []byte) {
			writeFile(t, fsys, dir+"/events.jsonl", nil)
		}, quarantined},
		{"missing events.jsonl beside a valid session.json", func(t *testing.T, fsys faultfs.FS, dir string, _ []byte) {
			if err := fsys.Remove(dir + "/events.jsonl"); err != nil {
				t.Fatal(err)
			}
		}, quarantined},
		{"symlinked events.jsonl", func(t *testing.T, fsys faultfs.FS, dir string, log []byte) {
			target := filepath.Join(filepath.Dir(filepath.Dir(dir)), "elsewhere.jsonl")
			writeFile(t, fsys, target, log)
			if err := fsys.Remove(dir + "/events.jsonl"); err != nil {
				t.Fatal(err)
			}
			if err := fsys.(faultfs.Symlinker).Symlink(target, dir+"/events.jsonl"); err != nil {
				t.Fatal(err)
			}
		}, corruptUntouched},
		{"symlinked session.json", func(t *testing.T, fsys faultfs.FS, dir string, _ []byte) {
			target := filepath.Join(filepath.Dir(filepath.Dir(dir)), "elsewhere.json")
			b, err := faultfs.ReadFile(fsys, dir+"/session.json")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, fsys, target, b)
			if err := fsys.Remove(dir + "/session.json"); err != nil {
				t.Fatal(err)
			}
			if err := fsys.(faultfs.Symlinker).Symlink(target, dir+"/session.json"); err != nil {
				t.Fatal(err)
			}
		}, healthyLinkKept},
	}
	filesystems := []struct {
		name string
		make func(t *testing.T) (faultfs.FS, string)
	}{
		{"OS", func(t *testing.T) (faultfs.FS, string) { return faultfs.OS{}, t.TempDir() }},
		{"Mem", func(t *testing.T) (faultfs.FS, string) { return faultfs.NewMem(), "/home" }},
	}
	for _, fsc := range filesystems {
		for _, tc := range cases {
			t.Run(fsc.name+"/"+tc.name, func(t *testing.T) {
				fsys, home := fsc.make(t)
				th := &tamperHome{t: t, fsys: fsys, home: home}
				th.start()
				victim, err := th.c.CreateAgent(context.Background(), CreateSpec{Name: "victim", Provider: "inproc", Model: "echo"})
				if err != nil {
					t.Fatal(err)
				}
				other, err := th.c.CreateAgent(context.Background(), CreateSpec{Name: "other", Provider: "inproc", Model: "echo"})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range []string{"one", "two"} {
					if _, err := th.c.Send(context.Background(), victim, m, "", "", nil); err != nil {
						t.Fatal(err)
					}
				}
				th.stop()
				dir := th.c.agentDir(victim)
				log, err := faultfs.ReadFile(fsys, dir+"/events.jsonl")
				if err != nil {
					t.Fatal(err)
				}
				tc.tamper(t, fsys, dir, log)
				before := dirState(t, fsys, dir)
				outside := dirState(t, fsys, home) // link targets live in the home
				th.start()
				defer th.stop()

				switch tc.want {
				case corruptUntouched:
					v, ok := th.view(victim)
					if !ok || v.Status != "corrupt" || v.Error == "" {
						t.Fatalf("victim = %+v (listed %v), want status corrupt with an error", v, ok)
					}
					if after := dirState(t, fsys, dir); !sameState(before, after) {
						t.Fatalf("recovery changed the corrupt agent's files:\nbefore %q\nafter  %q", before, after)
					}
					if th.rep.Corrupt != 1 || th.rep.Orphans != 0 || th.rep.Quarantined != 0 {
						t.Fatalf("report %+v", th.rep)
					}
				case quarantined:
					if _, ok := th.view(victim); ok {
						t.Fatal("a quarantined agent is still listed")
					}
					if ok, _ := faultfs.Exists(fsys, dir); ok {
						t.Fatal("the directory is still under agents/")
					}
					q := filepath.Join(home, QuarantineDir)
					ents, err := fsys.ReadDir(q)
					if err != nil || len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), victim+"-") {
						t.Fatalf("quarantine holds %v (%v), want the victim's directory", ents, err)
					}
					if after := dirState(t, fsys, filepath.Join(q, ents[0].Name())); !preserved(before, after) {
						t.Fatalf("the quarantined directory differs:\nbefore %q\nafter  %q", before, after)
					}
					if th.rep.Quarantined != 1 || th.rep.Orphans != 0 || th.c.Quarantined() != 1 {
						t.Fatalf("report %+v, Quarantined() %d", th.rep, th.c.Quarantined())
					}
				case healthyLinkKept:
					v, ok := th.view(victim)
					if !ok || v.Status != "idle" {
						t.Fatalf("victim = %+v, want idle (session.json is rebuilt from the log)", v)
					}
					after := dirState(t, fsys, dir)
					if after["events.jsonl"] != string(log) {
						t.Fatal("the log changed")
					}
					kept := false
					for name, content := range after {
						if strings.HasPrefix(name, "session.json.corrupt-") && content == "link" {
							kept = true
						}
					}
					if !kept || after["session.json"] == "link" || after["session.json"] == "" {
						t.Fatalf("the link was not moved aside and replaced by a rebuilt snapshot: %q", after)
					}
				}
				// Link targets (and anything else outside the agent
				// directories) are untouched.
				now := dirState(t, fsys, home)
				for name, content := range outside {
					if strings.HasPrefix(name, "elsewhere") && now[name] != content {
						t.Fatalf("the link target %s changed", name)
					}
				}
				if r, err := th.c.Send(context.Background(), other, "hi", "", "", nil); err != nil || r.Response != "echo: hi" {
					t.Fatalf("the other agent must serve: %+v %v", r, err)
				}
				if tc.want == corruptUntouched {
					es, _ := eventlog.ReadAll(fsys, filepath.Join(th.c.agentDir(other), "events.jsonl"))
					if len(es) == 0 {
						t.Fatal("the other agent's log is empty")
					}
				}
			})
		}
	}
}

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
			if ok, _ := faultfs.Exists(h.fs, "/home/"+QuarantineDir); ok {
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
	ents, err := h.fs.ReadDir("/home/" + QuarantineDir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("quarantine: %v %v", ents, err)
	}
	if err := h.fs.Rename("/home/"+QuarantineDir+"/"+ents[0].Name(), h.c.agentDir(root)); err != nil {
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
	if err := h.fs.Remove(h.c.store.Path(root)); err != nil {
		t.Fatal(err)
	}
	h.start()
	if ok, _ := faultfs.Exists(h.fs, "/home/"+QuarantineDir); !ok || h.c.Quarantined() != 1 {
		t.Fatal("the emptied parent was not quarantined")
	}
	if h.statusOf(kid) != "corrupt" || h.count(kid, "agent.terminated") != 0 {
		t.Fatalf("kid %s, %d agent.terminated; want corrupt and not terminated", h.statusOf(kid), h.count(kid, "agent.terminated"))
	}
}

// The USER inbox's log gets the same treatment: a link at user.jsonl is
// refused, naming it, and damage a crash cannot leave stops the start with
// the file untouched (`warren repair USER`).
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
			c, err := NewCore(CoreOptions{FS: m, Home: "/home", Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})},
				DefaultProvider: "inproc", DefaultModel: "echo", Config: config.Default(), NoWake: true, Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Recover(); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Recover = %v, want %v naming %s", err, tc.want, path)
			}
			_ = c.Close(context.Background())
			if after := dirState(t, m, "/home"); !sameState(before, after) {
				t.Fatalf("the home's files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}
