package registry

import (
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/provider/llm"
)

func newTestRegistry(t *testing.T, cfgJSON string, env map[string]string) *Registry {
	t.Helper()
	cfg := config.Default()
	if cfgJSON != "" {
		var err error
		if cfg, err = config.Parse([]byte(cfgJSON)); err != nil {
			t.Fatal(err)
		}
	}
	return New(Options{Static: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})},
		Config: func() config.Config { return cfg }, Getenv: func(k string) string { return env[k] }})
}

// TestLookupOrder: a registered provider, the built-in HTTP and acp
// entries and a config entry resolve; an unknown name does not; the same
// entry gives the same provider each time.
func TestLookupOrder(t *testing.T) {
	r := newTestRegistry(t, `{"providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m1"}}}`, nil)
	for _, name := range []string{"inproc", "openai", "ollama", "anthropic", "claude", "local"} {
		p, ok := r.Lookup(name)
		if !ok || p == nil {
			t.Fatalf("Lookup(%s) found nothing", name)
		}
		if again, _ := r.Lookup(name); again != p {
			t.Fatalf("Lookup(%s) made a second provider", name)
		}
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Fatal("an unknown entry resolved")
	}
	if !r.IsHTTP("local") || r.IsHTTP("claude") || r.IsHTTP("inproc") {
		t.Fatal("IsHTTP is wrong")
	}
	if m := r.DefaultModel("local"); m != "m1" {
		t.Fatalf("DefaultModel(local) = %q, want m1", m)
	}
}

// TestEntriesShowWhetherAKeyIsSetNeverTheKey: Entries lists every entry
// sorted, with key_set from the environment and no key anywhere.
func TestEntriesShowWhetherAKeyIsSetNeverTheKey(t *testing.T) {
	r := newTestRegistry(t, "", map[string]string{"OPENAI_API_KEY": "sk-secret"})
	es := r.Entries()
	names := r.Names()
	for i := range es {
		if es[i].Name != names[i] || (i > 0 && names[i-1] >= names[i]) {
			t.Fatalf("entries not sorted by name: %v", names)
		}
		if strings.Contains(fmtInfo(es[i]), "sk-secret") {
			t.Fatalf("entry %s shows the key", es[i].Name)
		}
		switch es[i].Name {
		case "openai":
			if !es[i].KeySet || es[i].KeyEnv != "OPENAI_API_KEY" {
				t.Fatalf("openai entry %+v, want its key variable set", es[i])
			}
		case "anthropic":
			if es[i].KeySet {
				t.Fatal("anthropic's key is not set")
			}
		}
	}
	if len(es) < 8 {
		t.Fatalf("entries %v, want the registered one and the built-in ones", names)
	}
}

func fmtInfo(i Info) string {
	return strings.Join(append([]string{i.Name, i.Type, i.BaseURL, i.Model, i.KeyEnv}, i.Command...), " ")
}

// TestProvidersGetTheDaemonLimits: the message limit and the per-turn
// transcript budget of config.json reach the HTTP entries' settings, and
// the message limit the acp entries'; without the keys, the defaults.
func TestProvidersGetTheDaemonLimits(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"limits": {"message_bytes": 65536, "turn_transcript_bytes": 2097152},
		"providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:1/v1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"openai", "anthropic", "local"} {
		st := entrySettings(cfg, name, httpType(cfg, name))
		if st.MessageBytes != 65536 || st.TurnBytes != 2<<20 {
			t.Fatalf("%s: %+v", name, st)
		}
	}
	if st := acpSettings(cfg, "claude"); st.MaxText != 65536 {
		t.Fatalf("acp: %+v", st)
	}
	var zero config.Config // a config without limits: the defaults
	if st := entrySettings(zero, "openai", "openai"); st.MessageBytes != config.DefaultMessageBytes || st.TurnBytes != config.DefaultTurnTranscriptBytes {
		t.Fatalf("defaults: %+v", st)
	}
	// The provider's own defaults (a zero Settings) are the config's.
	if llm.DefaultMessageBytes != config.DefaultMessageBytes || llm.DefaultTurnBytes != config.DefaultTurnTranscriptBytes {
		t.Fatal("provider/llm's default limits differ from config's")
	}
}
