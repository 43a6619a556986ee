package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefixNeverSplitsARune(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is 2 bytes: the cut falls inside it
		{"héllo", 3, "hé"},
		{"日本語", 4, "日"}, // each is 3 bytes
		{"日本語", 6, "日本"},
		{"a🙂b", 2, "a"}, // 4-byte rune
		{"a🙂b", 5, "a🙂"},
		{"ab\xffcd", 3, "ab\xff"}, // an invalid byte stands alone
		{"x", 0, ""},
	} {
		if got := Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestCutIsValidUTF8AtEveryLength(t *testing.T) {
	s := strings.Repeat("aé日🙂", 10)
	for n := 0; n <= len(s); n++ {
		got := Cut(s, n, "…")
		if !utf8.ValidString(got) {
			t.Fatalf("Cut at %d bytes: %q is not valid UTF-8", n, got)
		}
		if n < len(s) && (!strings.HasSuffix(got, "…") || len(got)-len("…") > n) {
			t.Fatalf("Cut at %d bytes: %q (want at most %d bytes and the mark)", n, got, n)
		}
	}
	if Cut("short", 10, "…") != "short" {
		t.Fatal("a text within the bound was changed")
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Add("\xff\xfe日本", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Prefix(s, n)
		if len(got) > n || !strings.HasPrefix(s, got) {
			t.Fatalf("Prefix(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Prefix of valid %q at %d is invalid: %q", s, n, got)
		}
		if len(s) > n && len(got) < n-utf8.UTFMax+1 {
			t.Fatalf("Prefix(%q, %d) = %q cut more than one rune", s, n, got)
		}
	})
}
