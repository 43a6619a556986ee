package config

import (
	"strings"
	"testing"
)

// TestWorkerSetting: an entry's worker labels are read, and a malformed
// setting is refused with the key it concerns.
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
	for _, bad := range []string{`"worker": 1`, `"worker": {"label": {}}`, `"worker": {"labels": []}`,
		`"worker": {"labels": {"gpu": 1}}`, `"worker": {"labels": {"a b": "x"}}`} {
		_, err := Parse([]byte(`{"providers": {"scripted": {` + bad + `}}}`))
		if err == nil || !strings.Contains(err.Error(), "providers.scripted.worker") {
			t.Errorf("%s: %v, want an error naming providers.scripted.worker", bad, err)
		}
	}
}
