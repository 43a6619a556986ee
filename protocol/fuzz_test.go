package protocol

import (
	"bytes"
	"testing"
)

func FuzzDecodeJSONRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"req-1","method":"agent.list","params":{}}` + "\n",
		`{"id":1,"method":"m","params":{"n":1e400}}`,
		`{"id":null}`, `[]`, ``, ` {`, `{"method":"m","params":[]}`,
		`{"id":{"x":1},"method":"m"}`, `{"id":"a","method":"m"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeJSONRequest(data)
		if err == nil {
			if req == nil || req.Method == "" || req.Params == nil {
				t.Fatalf("accepted request without method or params: %+v", req)
			}
			if _, err := EncodeJSONRequest(req); err != nil {
				t.Fatalf("re-encode decoded request: %v", err)
			}
			return
		}
		if CodeOf(err) != CodeInvalid {
			t.Fatalf("error not code 2: %v", err)
		}
		// The reply to a bad request must always be encodable.
		fr := &Frame{Kind: KindError, Error: AsError(err)}
		if req != nil {
			fr.ID = req.ID
		}
		if _, err := AppendJSONFrame(nil, fr); err != nil {
			t.Fatalf("error reply not encodable: %v", err)
		}
	})
}

func FuzzDecodeNativeFrame(f *testing.F) {
	seed := func(r *Request) []byte {
		b, err := EncodeNativeRequest(r)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed(&Request{ID: 1, Method: "agent.list", Params: Params{"a": []any{1, "x", nil}}}))
	f.Add(seed(&Request{ID: "c", Cancel: true}))
	res, _ := EncodeNativeFrame(&Frame{Kind: KindResult, ID: 1, Result: map[string]any{"x": 1.5}})
	f.Add(res)
	f.Add([]byte{0, 0, 0, 3, 0x81, 0xa1, 'a'})
	f.Add([]byte{0, 0, 0, 5, 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Read as a stream of frames, with a small limit so oversized
		// frames are exercised too.
		r := bytes.NewReader(data)
		for {
			payload, err := ReadNativeFrame(r, 1<<16)
			if err != nil {
				return
			}
			req, err := DecodeNativeRequest(payload)
			if err == nil {
				if req.Params == nil || (!req.Cancel && req.Method == "") {
					t.Fatalf("accepted bad request %+v", req)
				}
				if _, err := EncodeNativeRequest(req); err != nil {
					t.Fatalf("re-encode decoded request: %v", err)
				}
			} else if CodeOf(err) != CodeInvalid {
				t.Fatalf("error not code 2: %v", err)
			}
			if fr, err := DecodeNativeFrame(payload); err == nil {
				if _, err := EncodeNativeFrame(fr); err != nil {
					t.Fatalf("re-encode decoded frame %+v: %v", fr, err)
				}
			}
		}
	})
}
