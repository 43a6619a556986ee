package openai_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
)

func TestErrorClassification(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	type want struct {
		transient  bool
		retryAfter time.Duration // exact, or -1: "about 30 s"
		contains   []string
		is         error
	}
	f := llmfake.New(llmfake.OpenAI) // for the error bodies only
	defer f.Close()
	cases := []struct {
		name string
		rep  llmfake.Reply
		want want
	}{
		{"429 retry-after seconds", f.RateLimited("2"), want{true, 2 * time.Second, []string{"HTTP 429 Too Many Requests", "Rate limit reached"}, nil}},
		{"429 retry-after date", f.RateLimited(date), want{true, -1, []string{"HTTP 429"}, nil}},
		{"429 retry-after-ms", llmfake.Reply{Status: 429, Header: map[string]string{"retry-after-ms": "1500", "Retry-After": "9"}, Body: `{"error":{"message":"slow down"}}`},
			want{true, 1500 * time.Millisecond, []string{"slow down"}, nil}},
		{"429 insufficient quota", llmfake.Reply{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
			want{false, 0, []string{"exceeded your current quota"}, nil}},
		{"408", f.Status(408, "timeout", "request timeout"), want{true, 0, []string{"HTTP 408"}, nil}},
		{"409", f.Status(409, "conflict", "conflict"), want{true, 0, []string{"HTTP 409"}, nil}},
		{"500", f.Status(500, "server_error", "boom"), want{true, 0, []string{"HTTP 500", "boom"}, nil}},
		{"503 html", llmfake.Reply{Status: 503, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"},
			want{true, 0, []string{"HTTP 503", "Service Temporarily Unavailable"}, nil}},
		{"529", f.Status(529, "overloaded_error", "Overloaded"), want{true, 0, []string{"HTTP 529", "Overloaded"}, nil}},
		{"401 with the server's message", f.Status(401, "invalid_request_error", "Incorrect API key provided: "+testKey),
			want{false, 0, []string{"HTTP 401 Unauthorized", "Incorrect API key provided", "$TEST_OPENAI_KEY"}, nil}},
		{"400", f.Status(400, "invalid_request_error", "bad tools"), want{false, 0, []string{"HTTP 400", "bad tools"}, nil}},
		{"404 model", f.Status(404, "invalid_request_error", "The model `gpt-x` does not exist"), want{false, 0, []string{"HTTP 404", "does not exist"}, nil}},
		{"context length", llmfake.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`},
			want{false, 0, []string{"maximum context length", "providers.openai.context_budget"}, llm.ErrContextLength}},
		{"openrouter numeric code", llmfake.Reply{Status: 502, Body: `{"error":{"code":502,"message":"upstream error"}}`}, want{true, 0, []string{"upstream error", "502"}, nil}},
		{"x-should-retry false", llmfake.Reply{Status: 500, Header: map[string]string{"x-should-retry": "false"}, Body: `{}`}, want{false, 0, []string{"HTTP 500"}, nil}},
		{"mid-stream server error", llmfake.Reply{Text: "abcdefghijklmnop", ErrorAfter: 2, ErrorType: "server_error", ErrorMessage: "The server had an error"},
			want{true, 0, []string{"HTTP 200 then an error event", "The server had an error"}, nil}},
		{"mid-stream rate limit", llmfake.Reply{Text: "abc", ErrorAfter: 1, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow"}, want{true, 0, []string{"slow"}, nil}},
		{"mid-stream invalid request", llmfake.Reply{Text: "abc", ErrorAfter: 1, ErrorType: "invalid_request_error", ErrorMessage: "nope"}, want{false, 0, []string{"nope"}, nil}},
		{"stream cut before finish", llmfake.Reply{Text: "abcdefghijklmnop", CutAfter: 2}, want{true, 0, []string{"ended before its end"}, llm.ErrStreamCut}},
		{"EOF without DONE or finish", llmfake.Reply{Raw: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"}, want{true, 0, nil, llm.ErrStreamCut}},
		{"garbage", llmfake.Reply{Raw: "hello\nthis is not\nan event stream\n"}, want{false, 0, []string{"malformed"}, llm.ErrMalformed}},
		{"data not JSON", llmfake.Reply{Raw: "data: {not json\n\n"}, want{false, 0, []string{"not JSON"}, llm.ErrMalformed}},
		{"HTML page with 200", llmfake.Reply{Raw: "<html><body>Login</body></html>", RawType: "text/html; charset=utf-8"}, want{false, 0, []string{"HTML page", "check base_url"}, llm.ErrMalformed}},
		{"JSON instead of stream", llmfake.Reply{Raw: `{"id":"x","choices":[{"message":{"content":"hi"}}]}`, RawType: "application/json"}, want{false, 0, []string{"instead of an event stream"}, llm.ErrMalformed}},
		{"100 MB line", llmfake.Reply{Raw: "data: " + strings.Repeat("a", 1<<20), RawRepeat: 100}, want{false, 0, []string{"longer than the limit"}, sse.ErrLineTooLong}},
		{"endless stream", llmfake.Reply{Raw: strings.Repeat(": keep-alive\n\n", 4096), RawRepeat: -1}, want{false, 0, []string{"larger than the limit"}, llm.ErrTooLarge}},
		{"stalled stream", llmfake.Reply{Text: "abcdefgh", Stall: true, StallAfter: 2}, want{true, 0, []string{"idle timeout"}, llm.ErrIdle}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(o *llm.Options) { o.MaxResponse, o.MaxLine = 4<<20, 1<<20 })
			if c.name == "stalled stream" {
				e.set(func(st *llm.Settings) { st.Timeout = 300 * time.Millisecond })
			}
			e.fake.Push(c.rep)
			o := send(e.session(), "go", &tools{})
			if o.err == nil {
				t.Fatalf("no error; response %q", o.resp)
			}
			var pe *provider.Error
			if !errors.As(o.err, &pe) {
				t.Fatalf("not a provider.Error: %v", o.err)
			}
			if pe.Transient != c.want.transient {
				t.Errorf("transient = %v, want %v: %v", pe.Transient, c.want.transient, o.err)
			}
			switch {
			case c.want.retryAfter >= 0 && pe.RetryAfter != c.want.retryAfter:
				t.Errorf("retry after %v, want %v", pe.RetryAfter, c.want.retryAfter)
			case c.want.retryAfter < 0 && (pe.RetryAfter < 20*time.Second || pe.RetryAfter > 31*time.Second):
				t.Errorf("retry after %v, want about 30s", pe.RetryAfter)
			}
			for _, s := range c.want.contains {
				if !strings.Contains(o.err.Error(), s) {
					t.Errorf("error %q does not contain %q", o.err, s)
				}
			}
			if c.want.is != nil && !errors.Is(o.err, c.want.is) {
				t.Errorf("error %v does not wrap %v", o.err, c.want.is)
			}
			if strings.Contains(o.err.Error(), testKey) {
				t.Errorf("the key is in the error: %v", o.err)
			}
			if n := e.fake.Count(); n != 1 {
				t.Errorf("%d requests; the provider must not retry by itself", n)
			}
		})
	}
}

func TestMissingKeyIsPermanentAndSendsNothing(t *testing.T) {
	e := newEnv(t)
	e.set(func(st *llm.Settings) { st.APIKeyEnv = "NOT_SET_ANYWHERE_XYZ" })
	o := send(e.session(), "go", &tools{})
	if transient, _ := provider.IsTransient(o.err); o.err == nil || transient || !errors.Is(o.err, llm.ErrNoKey) ||
		!strings.Contains(o.err.Error(), "$NOT_SET_ANYWHERE_XYZ") {
		t.Fatalf("err = %v", o.err)
	}
	if e.fake.Count() != 0 {
		t.Fatal("a request went out without its key")
	}
}

func TestNoKeyVariableSendsNoAuthorization(t *testing.T) {
	e := newEnv(t)
	e.set(func(st *llm.Settings) { st.APIKeyEnv = "" })
	if o := send(e.session(), "go", &tools{}); o.err != nil {
		t.Fatal(o.err)
	}
	if h := e.fake.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q without a key variable", h)
	}
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	e := newEnv(t)
	e.set(func(st *llm.Settings) { st.BaseURL = "http://127.0.0.1:1/v1" })
	o := send(e.session(), "go", &tools{})
	if transient, _ := provider.IsTransient(o.err); !transient || !strings.Contains(o.err.Error(), "connection error") {
		t.Fatalf("err = %v", o.err)
	}
}

func TestRedirectIsRefused(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(llmfake.Reply{Status: 307, Header: map[string]string{"Location": "http://127.0.0.1:1/elsewhere"}})
	o := send(e.session(), "go", &tools{})
	if transient, _ := provider.IsTransient(o.err); o.err == nil || transient || !strings.Contains(o.err.Error(), "redirect") {
		t.Fatalf("err = %v", o.err)
	}
}
