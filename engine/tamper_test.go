package engine

import (
	"bytes"
	"context"
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
	"github.com/warren-dev/warren/quarantine"
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
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: th.fsys, Home: th.home,
		Providers:       map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
		DefaultProvider: "inproc", DefaultModel: "echo", Config: config.Default(), NoWake: true,
		Logger: hclog.NewNullLogger(), SessionSaveDelay: time.Millisecond}))
	if err != nil {
		th.t.Fatal(err)
	}
	rep, err := c.Recover(context.Background())
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
					q := filepath.Join(home, quarantine.Dir)
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
					<-th.c.scrubbed // session.json is read at first use or by the scrub
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
