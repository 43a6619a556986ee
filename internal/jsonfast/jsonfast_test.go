package jsonfast

import "testing"

func TestStringAt(t *testing.T) {
	cases := []struct {
		in   string
		want string
		end  int
		ok   bool
	}{
		{`"abc"x`, "abc", 5, true},
		{`"a\"b\n\u00e9"`, "a\"b\né", 14, true},
		{`""`, "", 2, true},
		{`"unterminated`, "", 0, false},
		{"\"ctl\x01\"", "", 0, false},
		{"\"bad\xff\"", "", 0, false},
		{`"bad \q escape"`, "", 0, false},
		{`x"abc"`, "", 0, false},
	}
	for _, c := range cases {
		s, end, ok := StringAt([]byte(c.in), 0)
		if s != c.want || end != c.end || ok != c.ok {
			t.Errorf("StringAt(%q) = %q, %d, %v; want %q, %d, %v", c.in, s, end, ok, c.want, c.end, c.ok)
		}
	}
	if i, ok := Once([]byte(`a"x"b"x"`), []byte(`"x"`)); ok || i != -1 {
		t.Errorf("Once of a repeated separator = %d, %v", i, ok)
	}
}
