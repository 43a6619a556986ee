package jsonfast

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// stringEndRef is stringEnd's definition, byte by byte.
func stringEndRef(d []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(d); {
		switch c := d[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			n := escapeLen(d[j:])
			if n == 0 {
				return -1, false
			}
			escaped = true
			j += n
		case c < 0x20:
			return -1, false
		default:
			j++
		}
	}
	return -1, false
}

// TestStringEndIsItsDefinition holds the eight-bytes-at-a-time scan to
// the byte-by-byte definition: special8 for every byte at every place of
// a word, and stringEnd on random strings of the bytes that matter.
func TestStringEndIsItsDefinition(t *testing.T) {
	for c := 0; c < 256; c++ {
		for at := 0; at < 8; at++ {
			w := []byte("aaaaaaaa")
			w[at] = byte(c)
			want := c < 0x20 || c == '"' || c == '\\'
			if got := special8(binary.LittleEndian.Uint64(w)); got != want {
				t.Fatalf("special8(%q) = %v, want %v", w, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab\"\\u0F9\x00\x1f\x20\x7f\x80\xff/ntx")
	for n := 0; n < 200000; n++ {
		d := make([]byte, 1+rng.IntN(48))
		d[0] = '"'
		for k := 1; k < len(d); k++ {
			if rng.IntN(3) == 0 {
				d[k] = alphabet[rng.IntN(len(alphabet))]
			} else {
				d[k] = byte(rng.IntN(256))
			}
		}
		for k := 0; k+8 <= len(d); k++ {
			if got, want := special8(binary.LittleEndian.Uint64(d[k:])), specialRef(d[k:k+8]); got != want {
				t.Fatalf("special8(%q) = %v, want %v", d[k:k+8], got, want)
			}
		}
		ge, gx := stringEnd(d, 0)
		we, wx := stringEndRef(d, 0)
		if ge != we || gx != wx {
			t.Fatalf("stringEnd(%q) = %d, %v; want %d, %v", d, ge, gx, we, wx)
		}
	}
}

// specialRef reports whether one of the bytes of b is a quote, a
// backslash or a control character.
func specialRef(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}
