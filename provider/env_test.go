package provider

import (
	"slices"
	"testing"
)

func TestProcessEnvAllowList(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "OPENAI_API_KEY=sk-x", "AWS_SECRET_ACCESS_KEY=y", "LC_ALL=C",
		"LCX=no", "MYTOOL_A=1", "MYTOOL=2", "TERM=xterm", "junk", "=empty"}
	got := ProcessEnv(environ, MergeEnv(PassEnv(environ, []string{"MYTOOL_*"}), []string{"WARREN_AGENT_ID=a", "HOME=/agent"}))
	want := []string{"PATH=/bin", "HOME=/agent", "LC_ALL=C", "TERM=xterm", "MYTOOL_A=1", "WARREN_AGENT_ID=a"}
	if !slices.Equal(got, want) {
		t.Fatalf("ProcessEnv = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		pattern, name string
		ok            bool
	}{{"LC_*", "LC_ALL", true}, {"LC_*", "LCX", false}, {"PATH", "PATH", true}, {"PATH", "PATHX", false}, {"X*", "X", true}} {
		if MatchEnv(tc.pattern, tc.name) != tc.ok {
			t.Errorf("MatchEnv(%q, %q) = %v", tc.pattern, tc.name, !tc.ok)
		}
	}
}
