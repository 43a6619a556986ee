package config

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

func TestDefault(t *testing.T) {
	d := Default()
	if !reflect.DeepEqual(d.Pools, map[string]int{"default": 4, "scripted": 32}) ||
		!reflect.DeepEqual(d.ProviderPools, map[string]string{"scripted": "scripted"}) ||
		d.MaxRetries != 3 || d.RetryBaseDelay != 500*time.Millisecond || d.TurnTimeout != 600*time.Second ||
		len(d.Providers) != 0 {
		t.Fatalf("Default() = %+v", d)
	}
	// Default returns fresh maps: changing one does not change the next.
	d.Pools["x"] = 1
	if _, ok := Default().Pools["x"]; ok {
		t.Fatal("Default shares its maps")
	}
	if d.PoolFor("scripted") != "scripted" || d.PoolFor("openai") != "default" {
		t.Fatal("PoolFor")
	}
}

func TestParseValid(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want func(*Config)
	}{
		{"empty document", "", func(*Config) {}},
		{"whitespace", " \n\t", func(*Config) {}},
		{"empty object", "{}", func(*Config) {}},
		{"retries only", `{"max_retries": 0, "retry_base_delay_ms": 250}`, func(c *Config) {
			c.MaxRetries = 0
			c.RetryBaseDelay = 250 * time.Millisecond
		}},
		{"pools merge", `{"pools": {"default": 8, "gpu": 2}, "provider_pools": {"openai": "gpu"}}`, func(c *Config) {
			c.Pools = map[string]int{"default": 8, "scripted": 32, "gpu": 2}
			c.ProviderPools = map[string]string{"scripted": "scripted", "openai": "gpu"}
		}},
		{"turn timeout", `{"turn_timeout_s": 30}`, func(c *Config) { c.TurnTimeout = 30 * time.Second }},
		{"limits inclusive", `{"pools":{"default":1024},"max_retries":20,"retry_base_delay_ms":60000,"turn_timeout_s":604800}`, func(c *Config) {
			c.Pools["default"] = 1024
			c.MaxRetries = 20
			c.RetryBaseDelay = time.Minute
			c.TurnTimeout = 604800 * time.Second
		}},
		{"integral float", `{"max_retries": 2.0e0}`, func(c *Config) { c.MaxRetries = 2 }},
		{"turn transcript budget", `{"limits": {"turn_transcript_bytes": 1048576, "message_bytes": 65536}}`, func(c *Config) {
			c.Limits.TurnTranscriptBytes, c.Limits.MessageBytes = 1<<20, 64<<10
		}},
		{"tree depth", `{"limits": {"tree_depth": 8}}`, func(c *Config) { c.Limits.TreeDepth = 8 }},
		{"providers", `{"providers": {"openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY", "model": "gpt-x", "max_tokens": 4096, "headers": {"X-Trace": "1"}}}}`, func(c *Config) {
			c.Providers["openai"] = ProviderConfig{
				BaseURL:   "https://api.openai.com/v1",
				APIKeyEnv: "OPENAI_API_KEY",
				Settings:  map[string]any{"model": "gpt-x", "max_tokens": json.Number("4096"), "headers": map[string]any{"X-Trace": "1"}},
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := Default()
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	cases := []struct {
		name string
		in   string
		// mention lists substrings the error must contain (the key and the
		// expectation).
		mention []string
	}{
		{"not json", `{"pools":`, []string{"JSON object"}},
		{"not an object", `[1,2]`, []string{"JSON object"}},
		{"null", `null`, []string{"JSON object"}},
		{"trailing data", `{} {}`, []string{"after its closing brace"}},
		{"unknown key typo", `{"max_retry": 3}`, []string{`"max_retry"`, `did you mean "max_retries"`}},
		{"unknown key case", `{"Pools": {}}`, []string{`"Pools"`, `did you mean "pools"`}},
		{"unknown key far", `{"colour": 1}`, []string{`"colour"`, "the keys are"}},
		{"zero pool", `{"pools": {"default": 0}}`, []string{`"pools.default"`, "1 to 1024", "got 0"}},
		{"negative pool", `{"pools": {"gpu": -2}}`, []string{`"pools.gpu"`, "got -2"}},
		{"huge pool", `{"pools": {"gpu": 100000}}`, []string{`"pools.gpu"`, "1 to 1024"}},
		{"fractional pool", `{"pools": {"gpu": 1.5}}`, []string{`"pools.gpu"`, "whole number"}},
		{"string pool", `{"pools": {"gpu": "4"}}`, []string{`"pools.gpu"`, "whole number"}},
		{"pools not object", `{"pools": 4}`, []string{`"pools"`, "JSON object"}},
		{"bad pool name", `{"pools": {"a b": 1}}`, []string{`"pools.a b"`, "names may use"}},
		{"empty pool name", `{"pools": {"": 1}}`, []string{`"pools."`, "1 to 64"}},
		{"missing pool", `{"provider_pools": {"openai": "gpu"}}`, []string{`"provider_pools.openai"`, `"gpu"`, "does not exist"}},
		{"pool name not string", `{"provider_pools": {"openai": 3}}`, []string{`"provider_pools.openai"`, "a string"}},
		{"negative retries", `{"max_retries": -1}`, []string{`"max_retries"`, "0 to 20"}},
		{"absurd retries", `{"max_retries": 1000000}`, []string{`"max_retries"`, "0 to 20"}},
		{"overflow", `{"max_retries": 1e400}`, []string{`"max_retries"`, "whole number"}},
		{"absurd delay", `{"retry_base_delay_ms": 86400000}`, []string{`"retry_base_delay_ms"`, "0 to 60000"}},
		{"zero timeout", `{"turn_timeout_s": 0}`, []string{`"turn_timeout_s"`, "1 to 604800"}},
		{"zero turn transcript", `{"limits": {"turn_transcript_bytes": 0}}`, []string{`"limits.turn_transcript_bytes"`}},
		{"huge turn transcript", `{"limits": {"turn_transcript_bytes": 2147483648}}`, []string{`"limits.turn_transcript_bytes"`}},
		{"zero tree depth", `{"limits": {"tree_depth": 0}}`, []string{`"limits.tree_depth"`}},
		{"huge tree depth", `{"limits": {"tree_depth": 100000}}`, []string{`"limits.tree_depth"`}},
		{"bool timeout", `{"turn_timeout_s": true}`, []string{`"turn_timeout_s"`, "whole number"}},
		{"provider not object", `{"providers": {"openai": "https://x"}}`, []string{`"providers.openai"`, "JSON object"}},
		{"literal api_key", `{"providers": {"openai": {"api_key": "sk-123"}}}`, []string{`"providers.openai.api_key"`, "api_key_env"}},
		{"literal key", `{"providers": {"x": {"key": "abc"}}}`, []string{`"providers.x.key"`, "api_key_env"}},
		{"literal token", `{"providers": {"x": {"Token": "abc"}}}`, []string{`"providers.x.Token"`, "api_key_env"}},
		{"literal secret suffix", `{"providers": {"x": {"client-secret": "abc"}}}`, []string{`"providers.x.client-secret"`}},
		{"nested authorization", `{"providers": {"x": {"headers": {"Authorization": "Bearer abc"}}}}`, []string{`"providers.x.headers.Authorization"`, "api_key_env"}},
		{"nested in list", `{"providers": {"x": {"auth": [{"password": "p"}]}}}`, []string{`"providers.x.auth[0].password"`}},
		{"api_key_env holds the key", `{"providers": {"x": {"api_key_env": "sk-abc-123"}}}`, []string{`"providers.x.api_key_env"`, "NAME of an environment variable"}},
		{"api_key_env not string", `{"providers": {"x": {"api_key_env": 5}}}`, []string{`"providers.x.api_key_env"`}},
		{"bad base_url", `{"providers": {"x": {"base_url": "ftp://host"}}}`, []string{`"providers.x.base_url"`, "http"}},
		{"base_url with credentials", `{"providers": {"x": {"base_url": "https://u:p@host"}}}`, []string{`"providers.x.base_url"`, "credentials"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%s) = %v, want ErrInvalid", c.in, err)
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "sk-123") || strings.Contains(err.Error(), "Bearer abc") {
				t.Errorf("error echoes a credential: %v", err)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	in := `{"pools":{"default":8,"gpu":2},"provider_pools":{"openai":"gpu"},"max_retries":5,"retry_base_delay_ms":100,"turn_timeout_s":60,"providers":{"openai":{"base_url":"https://api.example.com","api_key_env":"K","model":"o"}}}`
	c1, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c1)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse(out)
	if err != nil {
		t.Fatalf("re-parse %s: %v", out, err)
	}
	if !reflect.DeepEqual(c1, c2) {
		t.Fatalf("round trip differs:\n%+v\n%+v", c1, c2)
	}
}

func TestLoad(t *testing.T) {
	m := faultfs.NewMem()
	if err := m.MkdirAll("/home", 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := Load(m, "/home/config.json")
	if err != nil || !reflect.DeepEqual(got, Default()) {
		t.Fatalf("missing file: %+v, %v; want defaults", got, err)
	}
	if err := faultfs.WriteFile(m, "/home/config.json", []byte(`{"max_retries": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = Load(m, "/home/config.json")
	if err != nil || got.MaxRetries != 7 || got.Pools["default"] != 4 {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if err := faultfs.WriteFile(m, "/home/config.json", []byte(`{"max_retries": -7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(m, "/home/config.json"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "/home/config.json") {
		t.Fatalf("invalid file: %v, want ErrInvalid naming the path", err)
	}
	big := `{"providers":{"x":{"pad":"` + strings.Repeat("a", MaxFileSize) + `"}}}`
	if err := faultfs.WriteFile(m, "/home/config.json", []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(m, "/home/config.json"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized file: %v", err)
	}
	// A directory in the file's place is an error, not the defaults.
	if err := m.MkdirAll("/home/dir.json", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(m, "/home/dir.json"); err == nil {
		t.Fatal("directory loaded as config")
	}
	// The real filesystem works the same.
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/config.json", []byte(`{"turn_timeout_s": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(faultfs.OS{}, dir+"/config.json"); err != nil || got.TurnTimeout != 5*time.Second {
		t.Fatalf("OS Load = %+v, %v", got, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"pools":{"default":8},"provider_pools":{"a":"default"},"max_retries":1}`))
	f.Add([]byte(`{"providers":{"x":{"base_url":"http://h","nested":{"a":[1,{"b":2}]}}}}`))
	f.Add([]byte(`{"turn_timeout_s": 1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for name, n := range c.Pools {
			if n < 1 || n > MaxPoolSize || name == "" {
				t.Fatalf("accepted pool %q=%d", name, n)
			}
		}
		for p, pool := range c.ProviderPools {
			if _, ok := c.Pools[pool]; !ok {
				t.Fatalf("provider %q maps to missing pool %q", p, pool)
			}
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte(`{"pools":{"default":8,"gpu":2},"provider_pools":{"openai":"gpu"},"max_retries":5,"retry_base_delay_ms":100,"turn_timeout_s":60,"providers":{"openai":{"base_url":"https://api.example.com","api_key_env":"K","model":"o","headers":{"X-A":"1"}}}}`)
	for range b.N {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestProviderTypedSettings(t *testing.T) {
	cfg, err := Parse([]byte(`{"providers":{
		"openai":{"model":"gpt-4o-mini","max_tokens":1024,"timeout_s":30,"context_budget":50000,"headers":{"X-Title":"warren"}},
		"local":{"type":"openai","base_url":"http://127.0.0.1:8080/v1"},
		"claude-proxy":{"type":"anthropic","base_url":"https://proxy.example.com","api_key_env":"PROXY_KEY"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Providers["openai"]
	if o.Type("openai") != "openai" || o.Model() != "gpt-4o-mini" || o.MaxTokens() != 1024 || o.Timeout() != 30*time.Second ||
		o.ContextBudget() != 50000 || o.Headers()["X-Title"] != "warren" {
		t.Fatalf("openai entry: %+v", o)
	}
	if cfg.Providers["local"].Type("local") != "openai" || cfg.Providers["claude-proxy"].Type("claude-proxy") != "anthropic" {
		t.Fatal("types of config entries")
	}
	for _, c := range []struct{ in, want string }{
		{`{"providers":{"mine":{"base_url":"http://h"}}}`, `needs a "type"`},
		{`{"providers":{"mine":{"type":"grpc"}}}`, `"providers.mine.type" must be one of`},
		{`{"providers":{"ollama":{"type":"anthropic"}}}`, `has type "openai"`},
		{`{"providers":{"openai":{"model":5}}}`, `"providers.openai.model"`},
		{`{"providers":{"openai":{"max_tokens":0}}}`, `"providers.openai.max_tokens"`},
		{`{"providers":{"openai":{"timeout_s":"30"}}}`, `"providers.openai.timeout_s"`},
		{`{"providers":{"openai":{"context_budget":10}}}`, `"providers.openai.context_budget"`},
		{`{"providers":{"openai":{"headers":{"X-A":1}}}}`, `"providers.openai.headers.X-A"`},
		{`{"providers":{"openai":{"headers":{"X-Api-Key":"sk-1"}}}}`, `looks like a literal credential`},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestACPSettings(t *testing.T) {
	cfg, err := Parse([]byte(`{"providers":{
		"coder":{"type":"acp","command":["claude-agent-acp","--verbose"],"env":{"IS_SANDBOX":"1"},"mode":"default","permissions":"deny","timeout_s":600},
		"claude":{"permissions":"allow"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Providers["coder"]
	if c.Type("coder") != "acp" || strings.Join(c.Command(), " ") != "claude-agent-acp --verbose" || c.Mode() != "default" ||
		c.Permissions() != "deny" || c.Timeout() != 600*time.Second || c.Env["IS_SANDBOX"] != "1" {
		t.Fatalf("coder: %+v", c)
	}
	if cl := cfg.Providers["claude"]; cl.Command() != nil || cl.Permissions() != "allow" {
		t.Fatalf("claude: %+v", cl)
	}
	for _, c := range []struct{ in, want string }{
		{`{"providers":{"mine":{"type":"acp"}}}`, `"providers.mine" needs a "command"`},
		{`{"providers":{"mine":{"type":"acp","command":[]}}}`, `"providers.mine.command" must be a non-empty list`},
		{`{"providers":{"mine":{"type":"acp","command":"claude-agent-acp"}}}`, `"providers.mine.command" must be a non-empty list`},
		{`{"providers":{"mine":{"type":"acp","command":["x",3]}}}`, `providers.mine.command[1] must be a string`},
		{`{"providers":{"mine":{"type":"acp","command":["x","--key=sk-ant-123"]}}}`, `providers.mine.command[1] looks like a literal credential`},
		{`{"providers":{"mine":{"type":"acp","command":["x","ghp_abc"]}}}`, `looks like a literal credential`},
		{`{"providers":{"mine":{"type":"acp","command":["x"],"env":{"ANTHROPIC_API_KEY":"a"}}}}`, `looks like a literal credential`},
		{`{"providers":{"mine":{"type":"acp","command":["x"],"env":{"FOO":"sk-ant-1"}}}}`, `looks like a literal credential`},
		{`{"providers":{"mine":{"type":"acp","command":["x"],"permissions":"maybe"}}}`, `"providers.mine.permissions" must be one of allow, deny, ask`},
		{`{"providers":{"mine":{"type":"acp","command":["x"],"mode":""}}}`, `"providers.mine.mode"`},
		{`{"providers":{"openai":{"command":["x"]}}}`, `"providers.openai.command" is a setting of acp entries`},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "sk-ant") || strings.Contains(err.Error(), "ghp_abc")) {
			t.Errorf("error echoes a credential: %v", err)
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Fatalf("zero limits with defaults = %+v", got)
	}
	l := Limits{MessageBytes: 5, TurnTranscriptBytes: 7}.WithDefaults()
	if l.MessageBytes != 5 || l.TurnTranscriptBytes != 7 || l.InboxMessages != DefaultInboxMessages {
		t.Fatalf("= %+v", l)
	}
	if DefaultLimits().TurnTranscriptBytes != 32<<20 {
		t.Fatal("the documented default of limits.turn_transcript_bytes is 32 MiB")
	}
}

// TestMisspeltKeysAreErrors: an unknown key at any level of config.json
// makes the file invalid, and the error names the key and the nearest
// known one (SPEC 10: a misspelt baseurl used to point the entry at the
// default base URL, with its key).
func TestMisspeltKeysAreErrors(t *testing.T) {
	for _, c := range []struct{ in, key, suggestion string }{
		{`{"pool": {"default": 2}}`, `"pool"`, `"pools"`},
		{`{"provider_pool": {}}`, `"provider_pool"`, `"provider_pools"`},
		{`{"max_retry": 2}`, `"max_retry"`, `"max_retries"`},
		{`{"resum": "auto"}`, `"resum"`, `"resume"`},
		{`{"limits": {"message_byte": 1024}}`, `"limits.message_byte"`, `"message_bytes"`},
		{`{"limits": {"tree_dept": 8}}`, `"limits.tree_dept"`, `"tree_depth"`},
		{`{"providers": {"openai": {"baseurl": "https://x.example"}}}`, `"providers.openai.baseurl"`, `"base_url"`},
		{`{"providers": {"openai": {"modell": "gpt"}}}`, `"providers.openai.modell"`, `"model"`},
		{`{"providers": {"openai": {"max_token": 5}}}`, `"providers.openai.max_token"`, `"max_tokens"`},
		{`{"providers": {"claude": {"permission": "allow"}}}`, `"providers.claude.permission"`, `"permissions"`},
		{`{"providers": {"claude": {"resumee": "auto"}}}`, `"providers.claude.resumee"`, `"resume"`},
	} {
		_, err := Parse([]byte(c.in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), "did you mean "+c.suggestion) {
			t.Errorf("%s: %v; want an error naming %s and suggesting %s", c.in, err, c.key, c.suggestion)
		}
	}
}

// TestResumePolicy: an entry's own resume wins, then the file's, then
// its type's default (manual for acp, auto for the rest); a value other
// than auto or manual is refused.
func TestResumePolicy(t *testing.T) {
	cfg, err := Parse([]byte(`{"providers": {"codex": {"resume": "auto"}, "openai": {"resume": "manual"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"codex": "auto", "claude": "manual", "openai": "manual", "anthropic": "auto", "scripted": "auto", "inproc": "auto"} {
		if got := cfg.ResumePolicy(name); got != want {
			t.Errorf("ResumePolicy(%s) = %s, want %s", name, got, want)
		}
	}
	cfg, err = Parse([]byte(`{"resume": "manual", "providers": {"scripted": {"resume": "auto"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ResumePolicy("inproc") != "manual" || cfg.ResumePolicy("claude") != "manual" || cfg.ResumePolicy("scripted") != "auto" {
		t.Errorf("with resume manual: inproc %s, claude %s, scripted %s", cfg.ResumePolicy("inproc"), cfg.ResumePolicy("claude"), cfg.ResumePolicy("scripted"))
	}
	for _, in := range []string{`{"resume": "always"}`, `{"resume": true}`, `{"providers": {"claude": {"resume": "sometimes"}}}`} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "manual") {
			t.Errorf("%s: %v", in, err)
		}
	}
}
