package provider

import "testing"

// TestToolErrorText: a string error is its own text; another value is its
// JSON.
func TestToolErrorText(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"no such agent", "no such agent"},
		{map[string]any{"code": 3.0}, `{"code":3}`},
		{true, "true"},
	} {
		if got := ToolErrorText(tc.v); got != tc.want {
			t.Errorf("ToolErrorText(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
