package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestDecodeJSONRequest(t *testing.T) {
	req, err := DecodeJSONRequest([]byte(` {"id":"req-1","method":"agent.send","params":{"agent_id":"a","n":3}}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if req.ID != "req-1" || req.Method != "agent.send" || req.Params["agent_id"] != "a" || req.Params["n"] != 3.0 {
		t.Fatalf("decoded %+v", req)
	}
	req, err = DecodeJSONRequest([]byte(`{"id":12345678901234567890,"method":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.ID != json.Number("12345678901234567890") || req.Params == nil || len(req.Params) != 0 {
		t.Fatalf("id/params: %#v %#v", req.ID, req.Params)
	}
	if req, err := DecodeJSONRequest([]byte(`{"method":"m","params":null}`)); err != nil || req.ID != nil || req.Params == nil {
		t.Fatalf("null params: %+v %v", req, err)
	}
}

func TestDecodeJSONRequestErrors(t *testing.T) {
	cases := []struct {
		in, mention string
		echoID      bool
	}{
		{"", "empty request", false},
		{"  \n", "empty request", false},
		{"[1,2]", "must be a JSON object", false},
		{`"str"`, "must be a JSON object", false},
		{"{", "malformed JSON", false},
		{`{"id":1,"method":"m"} {"x":1}`, "malformed JSON", false},
		{`{"id":{"a":1},"method":"m"}`, `"id" must be`, false},
		{`{"id":1}`, `no "method"`, true},
		{`{"id":1,"method":null}`, `no "method"`, true},
		{`{"id":1,"method":5}`, `"method" must be a string`, true},
		{`{"id":1,"method":""}`, `"method" is empty`, true},
		{`{"id":1,"method":"m","params":[1]}`, `"params" must be an object`, true},
		{`{"id":1,"method":"m","params":"x"}`, `"params" must be an object`, true},
		{strings.Repeat("[", 20000), "must be a JSON object", false},
		{`{"a":` + strings.Repeat("[", 20000), "malformed JSON", false},
	}
	for _, c := range cases {
		req, err := DecodeJSONRequest([]byte(c.in))
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeInvalid || !strings.Contains(pe.Message, c.mention) {
			t.Errorf("%.40q: err = %v, want code 2 mentioning %q", c.in, err, c.mention)
			continue
		}
		if c.echoID && (req == nil || req.ID != json.Number("1")) {
			t.Errorf("%.40q: id not kept for the reply: %+v", c.in, req)
		}
	}
}

func TestJSONFrames(t *testing.T) {
	cases := []struct {
		f    Frame
		want string
	}{
		{Frame{Kind: KindResult, ID: "req-1", Result: map[string]any{"a": 1}}, `{"id":"req-1","result":{"a":1}}`},
		{Frame{Kind: KindResult, ID: json.Number("7")}, `{"id":7,"result":{}}`},
		{Frame{Kind: KindError, ID: "x", Error: Errorf(4, "unknown method: foo")}, `{"id":"x","error":{"code":4,"message":"unknown method: foo"}}`},
		{Frame{Kind: KindError, Error: Errorf(2, "bad <x>")}, `{"id":null,"error":{"code":2,"message":"bad <x>"}}`},
		{Frame{Kind: KindChunk, ID: "x", Chunk: "hi"}, `{"chunk":"hi"}`},
		{Frame{Kind: KindEvent, ID: "x", Event: map[string]any{"seq": 1}}, `{"event":{"seq":1}}`},
		{Frame{Kind: KindDone, ID: "x"}, `{"done":true}`},
	}
	for _, c := range cases {
		b, err := AppendJSONFrame(nil, &c.f)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want+"\n" {
			t.Errorf("%v frame = %s, want %s", c.f.Kind, b, c.want)
		}
		back, err := DecodeJSONFrame(b)
		if err != nil || back.Kind != c.f.Kind {
			t.Errorf("decode %s: %+v %v", b, back, err)
		}
	}
	if _, err := AppendJSONFrame(nil, &Frame{Kind: KindResult, Result: make(chan int)}); err == nil {
		t.Error("unencodable result accepted")
	}
}

func TestNativeRequestRoundTrip(t *testing.T) {
	in := &Request{ID: uint64(300), Method: "tool.call", Params: Params{
		"agent_id": "a", "n": 5, "neg": -70000, "f": 1.5, "arguments": map[string]any{"x": []any{1, "y", nil, true}},
	}}
	frame, err := EncodeNativeRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(frame) != uint32(len(frame)-HeaderSize) || frame[0] != 0 {
		t.Fatalf("bad length prefix % x", frame[:4])
	}
	// The payload is a plain msgpack map any msgpack library reads.
	var plain map[string]any
	if err := msgpack.Unmarshal(frame[HeaderSize:], &plain); err != nil || plain["method"] != "tool.call" {
		t.Fatalf("plain msgpack decode: %v %v", plain, err)
	}
	payload, err := ReadNativeFrame(bytes.NewReader(frame), MaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeNativeRequest(payload)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := req.Params.Int("n"); n != 5 {
		t.Errorf("n = %v", req.Params["n"])
	}
	if n, _ := req.Params.Int("neg"); n != -70000 {
		t.Errorf("neg = %v", req.Params["neg"])
	}
	args, err := req.Params.Map("arguments")
	if err != nil || len(args["x"].([]any)) != 4 {
		t.Errorf("arguments = %#v %v", req.Params["arguments"], err)
	}
	if id, ok := clientID(req.ID); !ok || id != 300 {
		t.Errorf("id = %#v", req.ID)
	}
	cf, _ := EncodeNativeRequest(&Request{ID: "c", Cancel: true})
	if req, err := DecodeNativeRequest(cf[HeaderSize:]); err != nil || !req.Cancel || req.ID != "c" {
		t.Errorf("cancel = %+v %v", req, err)
	}
}

type tagged struct {
	AgentID string          `json:"agent_id"`
	Data    json.RawMessage `json:"data"`
	Skip    string          `json:"-"`
}

func TestNativeFramesRoundTrip(t *testing.T) {
	frames := []Frame{
		{Kind: KindResult, ID: int64(1), Result: tagged{AgentID: "a", Data: json.RawMessage(`{"k":[1,2]}`), Skip: "x"}},
		{Kind: KindResult, ID: int64(2)},
		{Kind: KindError, ID: "s", Error: Errorf(5, "token consumed")},
		{Kind: KindChunk, ID: int64(3), Chunk: ""},
		{Kind: KindEvent, ID: int64(4), Event: map[string]any{"seq": uint64(1 << 40)}},
		{Kind: KindDone, ID: int64(5)},
	}
	for _, f := range frames {
		b, err := EncodeNativeFrame(&f)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeNativeFrame(b[HeaderSize:])
		if err != nil {
			t.Fatal(err)
		}
		if back.Kind != f.Kind {
			t.Fatalf("kind %v, want %v", back.Kind, f.Kind)
		}
		switch f.Kind {
		case KindResult:
			m := back.Result.(map[string]any)
			if f.ID == int64(1) {
				// json tags and RawMessage apply, as on the JSON framing
				if m["agent_id"] != "a" || m["data"].(map[string]any)["k"].([]any)[1] != int64(2) || len(m) != 2 {
					t.Errorf("result %#v", m)
				}
			} else if len(m) != 0 {
				t.Errorf("nil result = %#v", m)
			}
		case KindError:
			if *back.Error != *f.Error {
				t.Errorf("error %+v", back.Error)
			}
		case KindEvent:
			if n, ok := toInt(back.Event["seq"]); !ok || n != 1<<40 {
				t.Errorf("event %#v", back.Event)
			}
		}
	}
}

func TestReadNativeFrameLimits(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxFrame+1)
	if _, err := ReadNativeFrame(bytes.NewReader(hdr[:]), 0); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], 100)
	if _, err := ReadNativeFrame(bytes.NewReader(hdr[:]), 50); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("over custom limit: %v", err)
	}
	if _, err := ReadNativeFrame(bytes.NewReader(append(hdr[:], 1, 2)), 0); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated payload: %v", err)
	}
	if _, err := ReadNativeFrame(bytes.NewReader(hdr[:2]), 0); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated header: %v", err)
	}
	if _, err := ReadNativeFrame(bytes.NewReader(nil), 0); err != io.EOF {
		t.Errorf("clean EOF: %v", err)
	}
	if _, err := ReadNativeFrame(bytes.NewReader([]byte{0, 0, 0, 0}), 0); CodeOf(err) != CodeInvalid {
		t.Errorf("empty frame: %v", err)
	}
}

func TestDecodeNativeRequestRejectsHostileInput(t *testing.T) {
	deep := append(bytes.Repeat([]byte{0x81, 0xa1, 'a'}, 1000), 0xc0)
	cases := map[string][]byte{
		"not a map":      {0x92, 0x01, 0x02},
		"reserved c1":    {0x81, 0xa1, 'a', 0xc1},
		"ext type":       {0x81, 0xa1, 'a', 0xd4, 0x01, 0x02},
		"huge map32":     {0xdf, 0xff, 0xff, 0xff, 0xff},
		"huge array32":   {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff, 0},
		"huge str32":     {0x81, 0xa1, 'a', 0xdb, 0xff, 0xff, 0xff, 0xff},
		"deep nesting":   deep,
		"truncated":      {0x82, 0xa2, 'i', 'd', 0x01},
		"trailing":       {0x80, 0x00},
		"int key":        {0x81, 0x01, 0x02},
		"method int":     {0x82, 0xa2, 'i', 'd', 0x01, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0x05},
		"params array":   append([]byte{0x83, 0xa2, 'i', 'd', 0x01, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0xa1, 'm', 0xa6, 'p', 'a', 'r', 'a', 'm', 's'}, 0x90),
		"missing method": {0x81, 0xa2, 'i', 'd', 0x01},
		"id is a map":    {0x81, 0xa2, 'i', 'd', 0x80},
	}
	for name, payload := range cases {
		_, err := DecodeNativeRequest(payload)
		if CodeOf(err) != CodeInvalid {
			t.Errorf("%s: err = %v, want code 2", name, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	v, err := Normalize(map[string]any{"a": []string{"x"}, "b": int32(3), "c": Errorf(1, "nf"), "d": struct {
		X int `json:"x"`
	}{4}})
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["b"] != int64(3) || m["a"].([]any)[0] != "x" || m["c"].(map[string]any)["code"] != int64(1) || m["d"].(map[string]any)["x"] != int64(4) {
		t.Errorf("normalized %#v", m)
	}
	if _, err := Normalize(make(chan int)); err == nil {
		t.Error("channel accepted")
	}
}

func TestNormalizeDepthMatchesDecoder(t *testing.T) {
	build := func(depth int) any {
		var v any = "leaf"
		for i := 0; i < depth; i++ {
			v = map[string]any{"a": v}
		}
		return v
	}
	// Anything Normalize accepts, the native decoder accepts.
	ok := build(maxNormalizeDepth - 1)
	b, err := EncodeNativeFrame(&Frame{Kind: KindResult, ID: int64(1), Result: ok})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeNativeFrame(b[HeaderSize:]); err != nil {
		t.Fatalf("decoder refuses what the encoder produced: %v", err)
	}
	if _, err := EncodeNativeFrame(&Frame{Kind: KindResult, ID: int64(1), Result: build(maxNormalizeDepth + 5)}); err == nil {
		t.Fatal("over-deep result encoded")
	}
}
