package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"reflect"
	"testing"
)

// randValue builds a random value of the JSON data model.
func randValue(r *rand.Rand, depth int) any {
	k := r.Intn(10)
	if depth > 4 && k >= 8 {
		k = r.Intn(8)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.Intn(2) == 0
	case 2:
		return r.Int63() - r.Int63()
	case 3:
		return uint64(r.Int63()) << uint(r.Intn(2))
	case 4:
		return r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
	case 5, 6:
		b := make([]rune, r.Intn(20))
		for i := range b {
			b[i] = rune(r.Intn(0x3000))
			if b[i] >= 0xd800 && b[i] < 0xe000 {
				b[i] = 'x'
			}
		}
		return string(b)
	case 7:
		return int64(r.Intn(300) - 150)
	case 8:
		s := make([]any, r.Intn(5))
		for i := range s {
			s[i] = randValue(r, depth+1)
		}
		return s
	default:
		m := map[string]any{}
		for i := r.Intn(5); i > 0; i-- {
			m[fmt.Sprint("k", r.Intn(100))] = randValue(r, depth+1)
		}
		return m
	}
}

// canon maps integers to int64 when they fit (else uint64) so values
// decoded through either framing compare equal.
func canon(v any) any {
	switch x := v.(type) {
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return x
	case float64:
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canon(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = canon(e)
		}
		return out
	}
	return v
}

// TestNativeRoundTripProperty: any JSON-model value survives the native
// framing unchanged (as a result, an event and a request param).
func TestNativeRoundTripProperty(t *testing.T) {
	n := 500
	if os.Getenv("WARREN_LONG") == "1" {
		n = 200000
	}
	r := rand.New(rand.NewSource(42))
	for i := 0; i < n; i++ {
		v := map[string]any{"v": randValue(r, 0)}
		b, err := EncodeNativeFrame(&Frame{Kind: KindResult, ID: int64(i), Result: v})
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeNativeFrame(b[HeaderSize:])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(canon(f.Result), canon(v)) {
			t.Fatalf("result round trip:\n got %#v\nwant %#v", f.Result, v)
		}
		rb, err := EncodeNativeRequest(&Request{ID: "x", Method: "m", Params: v})
		if err != nil {
			t.Fatal(err)
		}
		req, err := DecodeNativeRequest(rb[HeaderSize:])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(canon(map[string]any(req.Params)), canon(v)) {
			t.Fatalf("params round trip:\n got %#v\nwant %#v", req.Params, v)
		}
		// The JSON framing carries the same value (numbers as float64).
		line, err := AppendJSONFrame(nil, &Frame{Kind: KindResult, ID: "x", Result: v})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ Result any }
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		viaJSON, _ := json.Marshal(back.Result)
		viaNative, _ := json.Marshal(f.Result)
		var a, c any
		json.Unmarshal(viaJSON, &a)
		json.Unmarshal(viaNative, &c)
		if !reflect.DeepEqual(a, c) {
			t.Fatalf("framings disagree:\n json   %s\n native %s", viaJSON, viaNative)
		}
	}
}
