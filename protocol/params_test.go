package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestErrorCodes(t *testing.T) {
	want := map[int]int{CodeNotFound: 1, CodeInvalid: 2, CodeInternal: 3, CodeUnknownMethod: 4, CodeTokenRejected: 5, CodeUnavailable: 6}
	for got, w := range want {
		if got != w {
			t.Errorf("code constant %d, want %d", got, w)
		}
	}
}

func TestCodeOf(t *testing.T) {
	pe := Errorf(CodeNotFound, "agent %q not found", "x")
	if pe.Error() != `agent "x" not found` {
		t.Errorf("message = %q", pe.Error())
	}
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{pe, 1},
		{fmt.Errorf("lookup: %w", pe), 1},
		{errors.New("disk on fire"), CodeInternal},
		{fmt.Errorf("x: %w", Errorf(CodeUnavailable, "recovering")), 6},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !IsCode(fmt.Errorf("w: %w", pe), CodeNotFound) || IsCode(errors.New("x"), CodeInternal) {
		t.Error("IsCode wrong")
	}
	if e := AsError(errors.New("boom")); e.Code != CodeInternal || e.Message != "boom" {
		t.Errorf("AsError = %+v", e)
	}
}

func wantInvalid(t *testing.T, err error, mention string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeInvalid {
		t.Fatalf("error = %v, want *Error code 2", err)
	}
	if !strings.Contains(pe.Message, mention) {
		t.Fatalf("message %q does not mention %q", pe.Message, mention)
	}
}

func TestParamsString(t *testing.T) {
	p := Params{"name": "bob", "n": 3.0, "nil": nil}
	if s, err := p.String("name"); err != nil || s != "bob" {
		t.Fatalf("String = %q, %v", s, err)
	}
	_, err := p.String("missing")
	wantInvalid(t, err, `"missing"`)
	_, err = p.String("nil")
	wantInvalid(t, err, `"nil"`)
	_, err = p.String("n")
	wantInvalid(t, err, `param "n" must be a string, got a number`)
	if s, err := p.OptString("missing", "def"); err != nil || s != "def" {
		t.Fatalf("OptString default = %q, %v", s, err)
	}
	if s, err := p.OptString("nil", "def"); err != nil || s != "def" {
		t.Fatalf("OptString null = %q, %v", s, err)
	}
	_, err = p.OptString("n", "def")
	wantInvalid(t, err, `"n"`)
}

func TestParamsIntAcceptsBothDecodings(t *testing.T) {
	ok := []any{int(7), int8(7), int16(7), int32(7), int64(7), uint(7), uint8(7), uint16(7), uint32(7), uint64(7), float32(7), float64(7), json.Number("7"), json.Number("7.0")}
	for _, v := range ok {
		p := Params{"k": v}
		n, err := p.OptInt("k", 0)
		if err != nil || n != 7 {
			t.Errorf("OptInt(%T %v) = %d, %v", v, v, n, err)
		}
		if n, err := p.Int("k"); err != nil || n != 7 {
			t.Errorf("Int(%T %v) = %d, %v", v, v, n, err)
		}
	}
	bad := []any{7.5, "7", true, math.NaN(), math.Inf(1), 1e19, uint64(math.MaxUint64), map[string]any{}, []any{}}
	for _, v := range bad {
		_, err := Params{"k": v}.OptInt("k", 0)
		wantInvalid(t, err, `param "k" must be an integer`)
	}
	if n, err := (Params{}).OptInt("k", 42); err != nil || n != 42 {
		t.Errorf("OptInt default = %d, %v", n, err)
	}
	_, err := Params{}.Int("k")
	wantInvalid(t, err, `missing required param "k"`)
	if n, err := (Params{"k": -3.0}).Int("k"); err != nil || n != -3 {
		t.Errorf("negative = %d, %v", n, err)
	}
}

func TestParamsMapBoolHas(t *testing.T) {
	p := Params{"m": map[string]any{"a": 1.0}, "b": true, "s": "x", "nil": nil}
	m, err := p.Map("m")
	if err != nil || m["a"] != 1.0 {
		t.Fatalf("Map = %v, %v", m, err)
	}
	_, err = p.Map("s")
	wantInvalid(t, err, `param "s" must be an object, got a string`)
	_, err = p.Map("x")
	wantInvalid(t, err, `missing required param "x"`)
	if m, err := p.OptMap("x"); err != nil || m != nil {
		t.Fatalf("OptMap absent = %v, %v", m, err)
	}
	_, err = p.OptMap("b")
	wantInvalid(t, err, `"b"`)
	if b, err := p.OptBool("b", false); err != nil || !b {
		t.Fatalf("OptBool = %v, %v", b, err)
	}
	if b, err := p.OptBool("x", true); err != nil || !b {
		t.Fatalf("OptBool default = %v, %v", b, err)
	}
	_, err = p.OptBool("s", false)
	wantInvalid(t, err, `param "s" must be a boolean`)
	if !p.Has("s") || p.Has("nil") || p.Has("x") {
		t.Fatal("Has wrong")
	}
}

func TestNames(t *testing.T) {
	if CodeName(CodeTokenRejected) != "token_rejected" || CodeName(99) != "code_99" {
		t.Error("CodeName")
	}
	if KindEvent.String() != "event" || FrameKind(0).String() != "kind_0" {
		t.Error("FrameKind.String")
	}
}
