package jsonfast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"
)

// members reads data with Members, or reports false.
func members(data []byte) ([][2]string, bool) {
	var out [][2]string
	m := Object(data)
	for {
		k, v, ok := m.Next()
		if !ok {
			break
		}
		pv, pok := m.PlainValue(v)
		want, wok := Plain(v)
		if pok != wok || string(pv) != string(want) {
			panic(fmt.Sprintf("PlainValue(%q) = %q, %v; Plain gives %q, %v", v, pv, pok, want, wok))
		}
		out = append(out, [2]string{string(k), string(v)})
	}
	return out, m.Valid()
}

// FuzzMembers checks the object reader against encoding/json: what it
// accepts is valid JSON, with the same members (encoding/json keeps the
// last of repeated keys), each value valid on its own; an object
// encoding/json accepts is refused only for an escaped key, invalid
// UTF-8 or deep nesting. Arrays likewise.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":1, "b" : [true,false,null,{"c":"d\n\u00e9"}], "e":-0.5e+3} `,
		`{"a":01}`, `{"a":"x\q"}`, `{"a":1,}`, `{"a" 1}`, `{"a":[1,]}`, `{"a":"\ud800"}`, "{\"a\":\"\x01\"}",
		`{"a":tru}`, `{"a":1}x`, `{"a\"b":2}`, `[1,"2",[3]]`, `{"a":"é"}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		got, ok := members(data)
		var want map[string]json.RawMessage
		isObject := json.Unmarshal(data, &want) == nil && want != nil
		if ok {
			if !valid || !isObject {
				t.Fatalf("Members accepted %q, which encoding/json refuses as an object", data)
			}
			last := map[string]string{}
			for _, kv := range got {
				if !json.Valid([]byte(kv[1])) {
					t.Fatalf("member %q of %q: value %q is not valid JSON", kv[0], data, kv[1])
				}
				last[kv[0]] = kv[1]
			}
			if len(last) != len(want) {
				t.Fatalf("Members found %d keys in %q, encoding/json %d", len(last), data, len(want))
			}
			for k, v := range want {
				if last[k] != string(v) {
					t.Fatalf("member %q of %q: %q, encoding/json %q", k, data, last[k], v)
				}
			}
		} else if isObject && utf8.Valid(data) && !bytes.Contains(data, []byte(`\`)) && bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) < maxDepth {
			t.Fatalf("Members refused %q, a valid object", data)
		}
		arr := Array(data)
		n := 0
		for {
			v, ok := arr.Next()
			if !ok {
				break
			}
			if !json.Valid(v) {
				t.Fatalf("element %q of %q is not valid JSON", v, data)
			}
			n++
		}
		var wantArr []json.RawMessage
		if arr.Valid() && (json.Unmarshal(data, &wantArr) != nil || wantArr == nil || len(wantArr) != n) {
			t.Fatalf("Array accepted %q (%d elements); encoding/json gives %d, refusing it or not", data, n, len(wantArr))
		}
	})
}

// FuzzScalars checks String, Plain and Int against encoding/json.
func FuzzScalars(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\"c\\d\/e"`, `"\u00e9\ud83d\ude00"`, `"\ud800x"`, `"\t\r\b\f"`, `"bad\q"`,
		"\"\xff\"", `42`, `-0`, `+1`, `01`, `1.0`, `1e3`, `9223372036854775808`, `true`, `false`, `null`, `"x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s string
		serr := json.Unmarshal(raw, &s)
		if got, ok := String(raw); ok && (serr != nil || got != s) {
			t.Fatalf("String(%q) = %q; encoding/json gives %q, %v", raw, got, s, serr)
		}
		if p, ok := Plain(raw); ok && (serr != nil || string(p) != s) {
			t.Fatalf("Plain(%q) = %q; encoding/json gives %q, %v", raw, p, s, serr)
		}
		if serr == nil && !bytes.Contains(raw, []byte(`\`)) && bytes.Equal(bytes.TrimSpace(raw), raw) && s == string(raw[1:len(raw)-1]) {
			if _, ok := String(raw); !ok {
				t.Fatalf("String refused %q, a plain string", raw)
			}
		}
		var n int
		nerr := json.Unmarshal(raw, &n)
		if got, ok := Int(raw); ok != (nerr == nil && string(raw) != "null" && bytes.Equal(bytes.TrimSpace(raw), raw)) || (ok && got != n) {
			t.Fatalf("Int(%q) = %d, %v; encoding/json gives %d, %v", raw, got, ok, n, nerr)
		}
	})
}

// BenchmarkMembers reads the members of the data of a generated log's
// usual events (bench_data_test.go), as the fold's decoders do.
func BenchmarkMembers(b *testing.B) {
	objs := make([][]byte, len(benchObjects))
	n := 0
	for i, s := range benchObjects {
		objs[i] = []byte(s)
		n += len(s)
	}
	b.Run("jsonfast", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			for _, o := range objs {
				m := Object(o)
				for {
					if _, _, ok := m.Next(); !ok {
						break
					}
				}
				if !m.Valid() {
					b.Fatal("invalid")
				}
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			for _, o := range objs {
				if !json.Valid(o) {
					b.Fatal("invalid")
				}
			}
		}
	})
}
