package projection

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// The member reader must agree with encoding/json on every object
// encoding/json writes, and never panic on anything.
func FuzzObjectMembers(f *testing.F) {
	f.Add([]byte(`{"run_id":"ab","turn":3,"prompt":"a \"q\" \\ \u00e9","ids":["x","y"],"n":{"a":[1,{"b":"}"}]},"z":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := map[string]json.RawMessage{}
		ok := objectMembers(data, func(k string, v []byte) { got[k] = append(json.RawMessage(nil), v...) })
		var want map[string]json.RawMessage
		if !utf8.Valid(data) || json.Unmarshal(data, &want) != nil || want == nil {
			return // not an object encoding/json accepts: whatever the reader said is fine
		}
		if !ok {
			// Allowed only for keys with escapes (the reader refuses them).
			return
		}
		if len(got) != len(want) {
			t.Fatalf("members %v, encoding/json %v", got, want)
		}
		for k, v := range want {
			var a, b any
			_ = json.Unmarshal(v, &a)
			if err := json.Unmarshal(got[k], &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("member %q: %s vs %s", k, got[k], v)
			}
		}
	})
}

func TestFieldHelpers(t *testing.T) {
	if s, ok := jsonString([]byte(`"a\nb\"c"`)); !ok || s != "a\nb\"c" {
		t.Fatalf("jsonString = %q %v", s, ok)
	}
	if ids, ok := jsonStrings([]byte(`["a", "b"]`)); !ok || len(ids) != 2 || ids[1] != "b" {
		t.Fatalf("jsonStrings = %v %v", ids, ok)
	}
	if ids, ok := jsonStrings([]byte(`[]`)); !ok || len(ids) != 0 {
		t.Fatalf("empty list = %v %v", ids, ok)
	}
	if n, ok := jsonInt([]byte(`42`)); !ok || n != 42 {
		t.Fatalf("jsonInt = %v %v", n, ok)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a" 1}`, `{"a":"x}`, `{"a":[1,2}`, `{"a":1} x`} {
		if objectMembers([]byte(bad), func(string, []byte) {}) {
			t.Errorf("accepted %s", bad)
		}
	}
}

// jsonString must decode exactly as encoding/json does.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\"c\\d\/e"`, `"\u00e9\ud83d\ude00"`, `"\ud800x"`, `"\t\r\b\f"`, `"bad\q"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := jsonString(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if ok && (err != nil || got != want) {
			t.Fatalf("jsonString(%q) = %q, encoding/json = %q (%v)", raw, got, want, err)
		}
	})
}

// fmtAny is v as JSON ("" if it has none), for comparing in messages.
func fmtAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
