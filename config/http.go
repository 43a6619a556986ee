package config

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// HTTP is config.json's "http": where the daemon serves its web console
// (SPEC 14).
type HTTP struct {
	// Listen is host:port ("" = no console).
	Listen string
	// TLSCert and TLSKey are PEM files; PlainHTTP says plain HTTP on an
	// address other than loopback is meant (a private network).
	TLSCert, TLSKey string
	PlainHTTP       bool
}

var httpKeys = []string{"listen", "tls_cert", "tls_key", "plain_http"}

// parseHTTP reads "http".
func parseHTTP(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["http"]
	if !ok {
		return nil
	}
	obj, err := decodeObject(raw, `"http"`)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(obj) {
		if !contains(httpKeys, k) {
			return fmt.Errorf("%w: unknown key %q%s; its keys are %s", ErrInvalid, "http."+k, suggestKey(k, httpKeys), strings.Join(httpKeys, ", "))
		}
	}
	var h HTTP
	for k, dst := range map[string]*string{"listen": &h.Listen, "tls_cert": &h.TLSCert, "tls_key": &h.TLSKey} {
		if v, ok := obj[k]; ok && json.Unmarshal(v, dst) != nil {
			return fmt.Errorf("%w: %q must be a string, got %s", ErrInvalid, "http."+k, preview(v))
		}
	}
	if v, ok := obj["plain_http"]; ok && json.Unmarshal(v, &h.PlainHTTP) != nil {
		return fmt.Errorf("%w: %q must be true or false, got %s", ErrInvalid, "http.plain_http", preview(v))
	}
	if err := h.Check(); err != nil {
		return err
	}
	cfg.HTTP = h
	return nil
}

// Check validates the listen address and its TLS: an address other than
// loopback needs tls_cert and tls_key, or plain_http said explicitly.
func (h HTTP) Check() error {
	if h.Listen == "" {
		if h.TLSCert != "" || h.TLSKey != "" || h.PlainHTTP {
			return fmt.Errorf("%w: \"http\" sets TLS or plain_http but no \"listen\" address", ErrInvalid)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(h.Listen)
	if err != nil || port == "" {
		return fmt.Errorf("%w: \"http.listen\" must be host:port, such as 127.0.0.1:7777, got %q", ErrInvalid, h.Listen)
	}
	if (h.TLSCert == "") != (h.TLSKey == "") {
		return fmt.Errorf("%w: \"http\" needs both tls_cert and tls_key, or neither", ErrInvalid)
	}
	if h.TLSCert == "" && !h.PlainHTTP && !loopback(host) {
		return fmt.Errorf("%w: the console would listen on %s without TLS: set \"tls_cert\" and \"tls_key\", or \"plain_http\": true if the network is private (a tailnet, say), or listen on 127.0.0.1",
			ErrInvalid, h.Listen)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
