package launch

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/stderrlog"
)

// TestLaunchIssuesRecordsAndRevokes: a launch's environment carries a
// fresh credential that acts as its agent until the process ends; the
// process is recorded once started and the record goes when it ends.
func TestLaunchIssuesRecordsAndRevokes(t *testing.T) {
	fsys := faultfs.NewMem()
	for _, d := range []string{"/home/procs", "/home/agents/a"} {
		if err := fsys.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	recs := agentproc.Records{FS: fsys, Dir: "/home/procs"}
	l := New(recs, stderrlog.New(fsys, func(id string) string { return "/home/agents/" + id }, hclog.NewNullLogger()), hclog.NewNullLogger())
	ln, err := l.For("a", nil).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	cred := ""
	for _, kv := range ln.Env() {
		if v, ok := strings.CutPrefix(kv, provider.EnvCredential+"="); ok {
			cred = v
		}
	}
	if !strings.HasPrefix(cred, credentialPrefix) {
		t.Fatalf("env %v has no credential", ln.Env())
	}
	if id, ok := l.AgentOf(cred); !ok || id != "a" {
		t.Fatalf("AgentOf(credential) = %q, %v, want a", id, ok)
	}
	if _, ok := l.AgentOf(credentialPrefix + "00"); ok {
		t.Fatal("an unknown credential acts as an agent")
	}
	if err := ln.Started(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	marker := ""
	for _, kv := range ln.Env() {
		if v, ok := strings.CutPrefix(kv, agentproc.EnvMarker+"="); ok {
			marker = v
		}
	}
	if len(marker) != 32 {
		t.Fatalf("env %v has no process marker", ln.Env())
	}
	if got, _, err := recs.List(); err != nil || len(got) != 1 || got[0].AgentID != "a" || got[0].Marker != marker {
		t.Fatalf("records after Started = %v, %v (marker %s)", got, err, marker)
	}
	ln.Ended()
	if _, ok := l.AgentOf(cred); ok {
		t.Fatal("the credential still acts after the process ended")
	}
	if got, _, err := recs.List(); err != nil || len(got) != 0 {
		t.Fatalf("records after Ended = %v, %v", got, err)
	}
}
