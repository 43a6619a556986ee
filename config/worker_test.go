package config

import (
	"strings"
	"testing"
)

// TestWorkerSetting: an entry's worker labels and agents' remote are
// read, and a malformed setting is refused with the key it concerns.
func TestWorkerSetting(t *testing.T) {
	cfg, err := Parse([]byte(`{"providers": {"scripted": {"worker": {"labels": {"gpu": "1", "zone": "lab-2"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.WorkerLabels("scripted"); len(l) != 2 || l["gpu"] != "1" || l["zone"] != "lab-2" {
		t.Fatalf("labels %v", l)
	}
	if l := cfg.WorkerLabels("inproc"); l != nil {
		t.Fatalf("an entry without the setting has labels %v", l)
	}
	if r := cfg.WorkerRemote("scripted"); r != "" {
		t.Fatalf("an entry without a remote has %q", r)
	}
	cfg, err = Parse([]byte(`{"providers": {"scripted": {"worker": {"remote": "ssh://git@host/team/agents.git"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r, l := cfg.WorkerRemote("scripted"), cfg.WorkerLabels("scripted"); r != "ssh://git@host/team/agents.git" || l != nil {
		t.Fatalf("remote %q, labels %v", r, l)
	}
	for _, bad := range []string{`"worker": 1`, `"worker": {"label": {}}`, `"worker": {"labels": []}`,
		`"worker": {"labels": {"gpu": 1}}`, `"worker": {"labels": {"a b": "x"}}`,
		`"worker": {"remote": "--upload-pack=touch /tmp/x"}`, `"worker": {"remote": "a b"}`, `"worker": {"remote": ""}`, `"worker": {"remote": 1}`} {
		_, err := Parse([]byte(`{"providers": {"scripted": {` + bad + `}}}`))
		if err == nil || !strings.Contains(err.Error(), "providers.scripted.worker") {
			t.Errorf("%s: %v, want an error naming providers.scripted.worker", bad, err)
		}
	}
}
