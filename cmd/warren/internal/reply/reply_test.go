package reply

import (
	"strings"
	"testing"
)

func TestJSONableConvertsMsgpackShapes(t *testing.T) {
	in := map[string]any{"a": map[any]any{"k": []byte("v")}, "b": []any{map[any]any{1: 2}}}
	var b strings.Builder
	if err := JSON(&b, in); err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"k":"v"},"b":[{"1":2}]}` + "\n"; b.String() != want {
		t.Errorf("JSON = %q, want %q", b.String(), want)
	}
}
