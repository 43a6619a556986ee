package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

const testID = "0123456789abcdef0123456789abcdef"

func fullSession() *Session {
	ts := time.Date(2026, 11, 22, 10, 1, 10, 123000000, time.UTC)
	return &Session{
		ID: testID, State: StateSuspended, Provider: "scripted", Model: "m1", Handle: "/x/script.py",
		ProviderState: []byte{0, 1, 2, 0xff, 'h', 'i'},
		CreatedAt:     ts, UpdatedAt: ts.Add(time.Second),
		Run: &Run{RunID: "r1", BootID: "b1", StartedAt: ts, Wait: &Wait{
			Kind: "question", Prompt: "ok?", TokenID: "t1", SecretHash: "h1", Deadline: ts.Add(time.Hour), CallID: "c1",
		}},
	}
}

func TestJSONFieldNames(t *testing.T) {
	data, err := json.Marshal(fullSession())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "state", "provider", "model", "handle", "provider_state", "created_at", "updated_at", "run"} {
		if _, ok := m[k]; !ok {
			t.Errorf("session.json lacks %q: %s", k, data)
		}
	}
	if len(m) != 9 {
		t.Errorf("session.json has extra fields: %s", data)
	}
	run := m["run"].(map[string]any)
	for _, k := range []string{"run_id", "boot_id", "started_at", "wait"} {
		if _, ok := run[k]; !ok {
			t.Errorf("run lacks %q: %s", k, data)
		}
	}
	wait := run["wait"].(map[string]any)
	for _, k := range []string{"kind", "prompt", "token_id", "secret_hash", "deadline", "call_id"} {
		if _, ok := wait[k]; !ok {
			t.Errorf("wait lacks %q: %s", k, data)
		}
	}
	if m["provider_state"] != "AAEC/2hp" {
		t.Errorf("provider_state = %v, want standard base64 AAEC/2hp", m["provider_state"])
	}
	if m["created_at"] != "2026-11-22T10:01:10.123Z" {
		t.Errorf("created_at = %v", m["created_at"])
	}
}

func TestJSONEmptyBlobAndNoRun(t *testing.T) {
	s := &Session{ID: testID, State: StateIdle}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"provider_state":""`) || !strings.Contains(string(data), `"run":null`) {
		t.Fatalf("empty session encodes as %s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.ProviderState != nil || back.Run != nil {
		t.Fatalf("round trip = %+v", back)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	s := fullSession()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(data) {
		t.Fatalf("round trip changed the document:\n%s\n%s", data, again)
	}
	if string(back.ProviderState) != string(s.ProviderState) || !back.Run.Wait.Deadline.Equal(s.Run.Wait.Deadline) {
		t.Fatalf("round trip lost data: %+v", back)
	}
	c := s.Clone()
	c.ProviderState[0] = 9
	c.Run.Wait.Prompt = "changed"
	if s.ProviderState[0] != 0 || s.Run.Wait.Prompt != "ok?" {
		t.Fatal("Clone shares memory with the original")
	}
}

func TestParseIgnoresUnknownFields(t *testing.T) {
	doc := `{"id":"` + testID + `","state":"idle","future":{"x":1},"run":{"run_id":"r","extra":true,"wait":null}}`
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if s.Run == nil || s.Run.RunID != "r" || s.Run.Wait != nil {
		t.Fatalf("parsed %+v", s)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	ok := `"id":"` + testID + `","state":"idle"`
	cases := []struct{ doc, field string }{
		{`{` + ok + `,`, "(document)"},
		{`[]`, "(document)"},
		{`null`, "(document)"},
		{`{"id":"` + testID + `","state":"broken"}`, "state"},
		{`{"id":"` + testID + `"}`, "state"},
		{`{"id":"` + testID + `","state":7}`, "state"},
		{`{` + ok + `,"provider_state":"!!notbase64"}`, "provider_state"},
		{`{` + ok + `,"created_at":"yesterday"}`, "created_at"},
		{`{` + ok + `,"run":"r1"}`, "run"},
		{`{` + ok + `,"run":{"run_id":""}}`, "run.run_id"},
		{`{` + ok + `,"run":{"run_id":"r","wait":{"deadline":"soon"}}}`, "run.wait.deadline"},
		{`{` + ok + `,"run":{"run_id":"r","wait":[1]}}`, "run.wait"},
		{`{"id":"ABC","state":"idle"}`, "id"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) = %v, want ErrInvalid", c.doc, err)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Parse(%s): field = %v, want %q (err %v)", c.doc, fe, c.field, err)
		}
	}
}

func TestStoreSaveLoad(t *testing.T) {
	fsys := faultfs.NewMem()
	st := NewStore(fsys, "home/agents")
	if p := st.Path(testID); p != "home/agents/"+testID+"/session.json" {
		t.Fatalf("Path = %s", p)
	}
	s := fullSession()
	if err := st.Save(s); err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Stat(st.Path(testID))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", info.Mode().Perm())
	}
	got, err := st.Load(testID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.State != s.State || got.Run.Wait.TokenID != "t1" || string(got.ProviderState) != string(s.ProviderState) {
		t.Fatalf("Load = %+v", got)
	}
	// Saving goes through a temp file and a rename.
	renamed := false
	for _, op := range fsys.Ops() {
		if op.Kind == faultfs.OpRename && op.To == st.Path(testID) {
			renamed = true
		}
	}
	if !renamed {
		t.Fatalf("no rename onto session.json in %v", fsys.Ops())
	}
}

func TestStoreLoadErrors(t *testing.T) {
	fsys := faultfs.NewMem()
	st := NewStore(fsys, "agents")
	if _, err := st.Load(testID); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want ErrNotExist", err)
	}
	if _, err := st.Load("../etc"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load(bad id) = %v, want ErrInvalid", err)
	}
	other := strings.Repeat("a", 32)
	if err := fsys.MkdirAll("agents/"+testID, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(doc string) {
		t.Helper()
		if err := faultfs.WriteFile(fsys, st.Path(testID), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ doc, field string }{
		{`{"id":"` + other + `","state":"idle"}`, "id"},
		{`{"id":"` + testID + `","state":"zombie"}`, "state"},
		{`{"id":"` + testID + `","state":"idle","provider_state":"%%%"}`, "provider_state"},
		{`not json`, "(document)"},
	} {
		write(c.doc)
		_, err := st.Load(testID)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), st.Path(testID)) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Load(%s) = %v, want ErrInvalid naming the file and %q", c.doc, err, c.field)
		}
	}
}

// A session.json that is a symbolic link is an error naming it; the link is
// not followed (issue 16: a planted link must not feed the daemon another
// file).
func TestStoreLoadRefusesASymlink(t *testing.T) {
	fsys := faultfs.NewMem()
	st := NewStore(fsys, "agents")
	other := NewStore(fsys, "elsewhere")
	if err := other.Save(fullSession()); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll("agents/"+testID, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Symlink("/"+other.Path(testID), st.Path(testID)); err != nil {
		t.Fatal(err)
	}
	_, err := st.Load(testID)
	if !errors.Is(err, faultfs.ErrSymlink) || !strings.Contains(err.Error(), st.Path(testID)) {
		t.Fatalf("Load through a symlink = %v, want faultfs.ErrSymlink naming the path", err)
	}
}

func TestSaveRefusesInvalid(t *testing.T) {
	st := NewStore(faultfs.NewMem(), "agents")
	for _, s := range []*Session{
		nil,
		{ID: "short", State: StateIdle},
		{ID: testID, State: "weird"},
		{ID: testID, State: StateRunning, Run: &Run{}},
	} {
		if err := st.Save(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Save(%+v) = %v, want ErrInvalid", s, err)
		}
	}
}

// TestSaveCrashAtEveryOp crashes the filesystem at every mutating operation
// of a Save that replaces an existing session.json and checks that after a
// power loss or a process crash Load returns the old or the new session,
// never an error, and that a completed Save survives.
func TestSaveCrashAtEveryOp(t *testing.T) {
	oldS := fullSession()
	oldS.State = StateIdle
	newS := fullSession()
	newS.State = StateRunning
	newS.ProviderState = []byte(strings.Repeat("x", 5000))
	for _, mode := range []faultfs.RebootMode{faultfs.PowerLoss, faultfs.ProcessCrash} {
		for _, tail := range []faultfs.TailMode{faultfs.TailNone, faultfs.TailPrefix, faultfs.TailZero, faultfs.TailGarbage} {
			for k := 1; ; k++ {
				fsys := faultfs.NewMem()
				st := NewStore(fsys, "agents")
				if err := st.Save(oldS); err != nil {
					t.Fatal(err)
				}
				fsys.CrashAt(k)
				err := st.Save(newS)
				finished := err == nil
				fsys.Reboot(faultfs.RebootOptions{Mode: mode, Tail: tail})
				got, lerr := st.Load(testID)
				name := fmt.Sprintf("mode %v tail %v crash at op %d", mode, tail, k)
				if lerr != nil {
					t.Fatalf("%s: Load: %v", name, lerr)
				}
				if got.State != StateIdle && got.State != StateRunning {
					t.Fatalf("%s: state %s", name, got.State)
				}
				if got.State == StateRunning && len(got.ProviderState) != 5000 {
					t.Fatalf("%s: new session with a torn blob", name)
				}
				if finished {
					if got.State != StateRunning {
						t.Fatalf("%s: completed Save lost", name)
					}
					break
				}
			}
		}
	}
}
