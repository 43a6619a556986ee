package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestProviderEnvSettings(t *testing.T) {
	cfg, err := Parse([]byte(`{"providers":{"scripted":{"env_pass":["GOPATH","MYTOOL_*"],"env":{"MODE":"ci","LEVEL":"3"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers["scripted"]
	if !slices.Equal(p.EnvPass, []string{"GOPATH", "MYTOOL_*"}) || p.Env["MODE"] != "ci" || p.Env["LEVEL"] != "3" || len(p.Settings) != 0 {
		t.Fatalf("parsed %+v", p)
	}
	again, err := cfg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if cfg2, err := Parse(again); err != nil || !slices.Equal(cfg2.Providers["scripted"].EnvPass, p.EnvPass) || cfg2.Providers["scripted"].Env["MODE"] != "ci" {
		t.Fatalf("round trip of %s: %+v, %v", again, cfg2.Providers["scripted"], err)
	}
}

func TestProviderEnvSettingsRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"env_pass":["*"]}`, "bare"},
		{`{"env_pass":"PATH"}`, "list"},
		{`{"env_pass":["A B"]}`, "variable name"},
		{`{"env":{"API_KEY":"x"}}`, "literal credential"},
		{`{"env":{"GITHUB_TOKEN":"x"}}`, "literal credential"},
		{`{"env":{"MODEL_HINT":"sk-abc123"}}`, "literal credential"},
		{`{"env":{"AWS":"AKIAABCDEFGH"}}`, "literal credential"},
		{`{"env":{"WARREN_AGENT_CREDENTIAL":"x"}}`, "sets WARREN_AGENT_CREDENTIAL itself"},
		{`{"env":{"WARREN_AGENT_PROCESS":"x"}}`, "sets WARREN_AGENT_PROCESS itself"},
		{`{"env":{"1X":"x"}}`, "variable names"},
		{`{"env":{"X":1}}`, "string values"},
	} {
		_, err := Parse([]byte(`{"providers":{"scripted":` + tc.doc + `}}`))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.doc, err, tc.want)
		}
	}
}
