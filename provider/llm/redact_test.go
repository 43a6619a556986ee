package llm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

const rkey = "sk-proj-ZZSECRETKEY0123456789abcdefTOPSECRETzz"

// jsonEscape writes every character of s as \u00XX.
func jsonEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

func percent(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if upper {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			fmt.Fprintf(&b, "%%%02x", s[i])
		}
	}
	return b.String()
}

func TestRedactorForms(t *testing.T) {
	r := newRedactor(rkey)
	mixed := "sk-pr" + jsonEscape("oj-ZZ") + "SECRET" + `\/` + percent("KEY0", true) + "123&#52;&#x35;6789abcdefTOPSECRETzz"
	cases := []struct{ name, in string }{
		{"raw", "Bad key " + rkey + " given"},
		{"prefix cut at 23", "error: " + rkey[:23] + "..."},
		{"prefix of 8", "x" + rkey[:8]},
		{"suffix", rkey[30:] + " trailing"},
		{"middle", "[" + rkey[10:25] + "]"},
		{"json escaped", `{"message":"` + jsonEscape(rkey) + `"}`},
		{"json escaped twice", strings.ReplaceAll(jsonEscape(rkey), `\`, `\\`)},
		{"json escaped prefix", jsonEscape(rkey[:9])},
		{"json mixed", mixed},
		{"percent upper", "/v1/x?k=" + percent(rkey, true)},
		{"percent lower", percent(rkey, false)},
		{"percent twice", strings.ReplaceAll(percent(rkey, true), "%", "%25")},
		{"url query", "http://evil/?k=" + url.QueryEscape(rkey)},
		{"html decimal", func() string {
			var b strings.Builder
			for i := 0; i < len(rkey); i++ {
				fmt.Fprintf(&b, "&#%d;", rkey[i])
			}
			return b.String()
		}()},
		{"html hex no semicolons", func() string {
			var b strings.Builder
			for i := 0; i < 12; i++ {
				fmt.Fprintf(&b, "&#x%x", rkey[i])
			}
			return b.String()
		}()},
		{"quoted by %q", fmt.Sprintf("%q", "a\"b"+rkey)},
		{"twice", rkey + " and " + rkey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if KeyLeak(c.in, rkey) == "" {
				t.Fatalf("the test's decoder does not see the key in %q", c.in)
			}
			got := r.String(c.in)
			if run := KeyLeak(got, rkey); run != "" {
				t.Fatalf("%q left %q in %q", c.in, run, got)
			}
			if !strings.Contains(got, keyMark) {
				t.Fatalf("no mark in %q", got)
			}
		})
	}
}

func TestRedactorLeavesOtherTextAlone(t *testing.T) {
	r := newRedactor(rkey)
	for _, s := range []string{
		"", "HTTP 400 Bad Request", "sk-proj", "SECRETK", "50% off & 100%", `a \u00e9 b \\ c`, "&#; &#x; %zz",
		"The quick brown fox jumps over the lazy dog 0123456",
	} {
		if got := r.String(s); got != s {
			t.Errorf("%q became %q", s, got)
		}
	}
	// A short key is redacted only whole; a very short one not at all.
	if got := newRedactor("abcdef").String("xabcdefy abcde"); got != "x[key]y abcde" {
		t.Errorf("short key: %q", got)
	}
	if got := newRedactor("abc").String("abc"); got != "abc" {
		t.Errorf("3-byte key: %q", got)
	}
	if got := (*redactor)(nil).String(rkey); got != rkey {
		t.Errorf("nil redactor: %q", got)
	}
}

// Every way of cutting a text holding the key into deltas gives a stream
// with no run of 8 characters of the key, in any form.
func TestRedactorStream(t *testing.T) {
	r := newRedactor(rkey)
	texts := []string{
		"before " + rkey + " after",
		"x" + jsonEscape(rkey[:20]) + "y",
		percent(rkey, true),
		rkey + rkey,
		"plain text with no key at all, longer than one window of holding back",
	}
	for _, text := range texts {
		for size := 1; size <= 13; size++ {
			for off := 0; off < size; off++ {
				var out strings.Builder
				st := r.stream(func(s string) { out.WriteString(s) })
				st.Write(text[:off])
				for i := off; i < len(text); i += size {
					st.Write(text[i:min(i+size, len(text))])
				}
				st.Flush()
				got := out.String()
				if run := KeyLeak(got, rkey); run != "" {
					t.Fatalf("deltas of %d from %d: %q left in %q", size, off, run, got)
				}
				if !strings.Contains(text, rkey[:8]) && !strings.Contains(text, `\u`) && !strings.Contains(text, "%") && got != text {
					t.Fatalf("clean text changed: %q -> %q", text, got)
				}
			}
		}
	}
	// Text without the key passes whole, only delayed.
	var out []string
	st := r.stream(func(s string) { out = append(out, s) })
	st.Write("hello ")
	st.Write("world")
	st.Flush()
	if strings.Join(out, "") != "hello world" {
		t.Fatalf("%q", out)
	}
}

func TestRedactedErrorKeepsClassAndSentinels(t *testing.T) {
	r := newRedactor(rkey)
	inner := fmt.Errorf("HTTP 429 %s: %w", rkey, ErrStreamCut)
	err := r.error(provider.Transient(inner, 7*time.Second))
	if strings.Contains(err.Error(), rkey[:8]) {
		t.Fatalf("key in %v", err)
	}
	if tr, ra := provider.IsTransient(err); !tr || ra != 7*time.Second {
		t.Fatalf("class lost: %v %v", tr, ra)
	}
	if !errors.Is(err, ErrStreamCut) {
		t.Fatal("sentinel lost")
	}
	// No unwrapping reaches the server's text.
	for e := error(err); e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), rkey[:8]) {
			t.Fatalf("an unwrapped error holds the key: %v", e)
		}
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || strings.Contains(pe.Err.Error(), rkey[:8]) {
		t.Fatalf("provider error: %v", pe)
	}
	c := r.error(fmt.Errorf("request cancelled %s: %w", rkey, context.Canceled))
	if !errors.Is(c, context.Canceled) || strings.Contains(c.Error(), rkey[:8]) {
		t.Fatalf("cancel: %v", c)
	}
}

// BenchmarkRedactStream is the redactor's cost on streamed text without
// the key: per delta of a few bytes, as models stream.
func BenchmarkRedactStream(b *testing.B) {
	r := newRedactor(rkey)
	words := strings.Fields("The quick brown fox jumps over the lazy dog while 42 agents stream their answers token by token")
	b.ReportAllocs()
	n := 0
	st := r.stream(func(s string) { n += len(s) })
	for i := 0; i < b.N; i++ {
		st.Write(" " + words[i%len(words)])
	}
	st.Flush()
}

// FuzzRedact: the key (or a run of it), in any form the redactor knows,
// between any texts, one-shot and streamed in deltas of any size, never
// comes out raw; and, when the texts around it hold no escape of their
// own, never decoded either.
func FuzzRedact(f *testing.F) {
	f.Add("Bad key ", uint8(0), uint16(0), " given", uint8(3))
	f.Add(`{"message":"`, uint8(4), uint16(7), `"}`, uint8(1))
	f.Add("http://x/?k=", uint8(6), uint16(9), "&y=1", uint8(5))
	f.Add("x\\", uint8(5), uint16(300), "%", uint8(2))
	f.Add("&#", uint8(8), uint16(31), "&#x", uint8(7))
	f.Add("", uint8(1), uint16(15), "", uint8(16))
	f.Add("a%2", uint8(7), uint16(2), "\\u00", uint8(9))
	f.Fuzz(func(t *testing.T, before string, form uint8, pad uint16, after string, size uint8) {
		r := newRedactor(rkey)
		in := before + plantForm(form, pad) + after
		clean := !strings.ContainsAny(before+after, `\%&`)
		check := func(what, out string) {
			if run := keyRuns(out, rkey); run != "" {
				t.Fatalf("%s: %q raw in %q (from %q)", what, run, out, in)
			}
			if run := KeyLeak(out, rkey); clean && run != "" {
				t.Fatalf("%s: %q decoded from %q (from %q)", what, run, out, in)
			}
		}
		check("String", r.String(in))
		var out strings.Builder
		st := r.stream(func(s string) { out.WriteString(s) })
		n := int(size%32) + 1
		for i := 0; i < len(in); i += n {
			st.Write(in[i:min(i+n, len(in))])
		}
		st.Flush()
		check("stream", out.String())
	})
}

// plantForm is rkey, or a run of it, in one of the forms the redactor
// decodes.
func plantForm(form uint8, pad uint16) string {
	n := len(rkey)
	at := int(pad)
	run := rkey
	switch form / 10 % 4 {
	case 1:
		run = rkey[:8+at%(n-7)]
	case 2:
		run = rkey[n-8-at%(n-7):]
	case 3:
		from := at % (n - 7)
		run = rkey[from : from+8+(at/7)%(n-from-7)]
	}
	enc := func(f func(byte) string) string {
		var b strings.Builder
		for i := 0; i < len(run); i++ {
			if (at>>(i%16))&1 == 1 && form%10 >= 7 {
				b.WriteByte(run[i]) // mixed with raw characters
				continue
			}
			b.WriteString(f(run[i]))
		}
		return b.String()
	}
	switch form % 10 {
	case 1, 7:
		return enc(func(c byte) string { return fmt.Sprintf(`\u%04x`, c) })
	case 2, 8:
		return enc(func(c byte) string { return fmt.Sprintf(`\\\u%04X`, c) })
	case 3, 9:
		return enc(func(c byte) string { return fmt.Sprintf("%%%02x", c) })
	case 4:
		return enc(func(c byte) string { return fmt.Sprintf("%%25%02X", c) })
	case 5:
		return enc(func(c byte) string { return fmt.Sprintf("&#%d;", c) })
	case 6:
		return enc(func(c byte) string { return fmt.Sprintf("&#x%x", c) })
	}
	return run
}
