package config

import (
	"errors"
	"strings"
	"testing"
)

func TestHTTPListen(t *testing.T) {
	for _, ok := range []string{`{"http": {"listen": "127.0.0.1:7777"}}`, `{"http": {"listen": "[::1]:0"}}`, `{"http": {"listen": "localhost:7777"}}`,
		`{"http": {"listen": "0.0.0.0:7777", "tls_cert": "/c.pem", "tls_key": "/k.pem"}}`, `{"http": {"listen": "100.64.0.2:7777", "plain_http": true}}`} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"http": {"listen": "0.0.0.0:7777"}}`, "without TLS"},
		{`{"http": {"listen": "192.168.1.5:7777", "tls_cert": "/c.pem"}}`, "both tls_cert and tls_key"},
		{`{"http": {"listen": "7777"}}`, "host:port"},
		{`{"http": {"port": 7777}}`, `unknown key "http.port"`},
		{`{"http": {"plain_http": true}}`, `no "listen"`},
	} {
		if _, err := Parse([]byte(bad.doc)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.doc, err, bad.want)
		}
	}
}
