package config

import (
	"errors"
	"strings"
	"testing"
)

func TestNotifySinks(t *testing.T) {
	cfg, err := Parse([]byte(`{"notify": [
		{"type": "command", "argv": ["notify-send", "warren"]},
		{"type": "webhook", "name": "phone", "url": "https://ntfy.example/warren", "headers": {"Title": "warren"}, "secret_env": "NTFY_TOKEN"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Notify) != 2 {
		t.Fatalf("sinks: %+v", cfg.Notify)
	}
	c, w := cfg.Notify[0], cfg.Notify[1]
	if c.Type != "command" || c.Argv[0] != "notify-send" || !strings.HasPrefix(c.Name, "command-") {
		t.Errorf("command sink: %+v", c)
	}
	if w.Name != "phone" || w.URL != "https://ntfy.example/warren" || w.Headers["Title"] != "warren" || w.SecretEnv != "NTFY_TOKEN" || w.SecretHeader != "Authorization" {
		t.Errorf("webhook sink: %+v", w)
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"notify": {"type": "command"}}`, "must be a list"},
		{`{"notify": [{"argv": ["x"]}]}`, `needs "type"`},
		{`{"notify": [{"type": "command", "argv": []}]}`, "argv"},
		{`{"notify": [{"type": "command", "argv": ["x"], "url": "http://a"}]}`, `unknown key "notify[0].url"`},
		{`{"notify": [{"type": "webhook", "url": "ftp://a"}]}`, "http(s) URL"},
		{`{"notify": [{"type": "webhook", "url": "https://u:p@a"}]}`, "without user info"},
		{`{"notify": [{"type": "webhook", "url": "https://a", "headers": {"X-Key": "sk-abcdefghijklmnopqrstuvwx"}}]}`, "secret_env"},
		{`{"notify": [{"type": "webhook", "url": "https://a", "headers": {"Authorization": "Bearer x"}}]}`, "secret_env"},
		{`{"notify": [{"type": "command", "name": "a", "argv": ["x"]}, {"type": "command", "name": "a", "argv": ["y"]}]}`, "two sinks"},
		{`{"notify": [{"type": "webhook", "url": "https://a", "secret_env": "A B"}]}`, "secret_env"},
	} {
		_, err := Parse([]byte(bad.doc))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.doc, err, bad.want)
		}
	}
}
