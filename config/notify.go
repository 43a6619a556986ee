package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// NotifySink is one sink of "notify" (SPEC 14): a command that gets each
// notification as JSON on its standard input, or a webhook that gets it
// as an HTTP POST.
type NotifySink struct {
	// Name identifies the sink in notify.jsonl: "name" in the file, else
	// the type and a hash of its argv or URL (so reordering the list
	// changes nothing).
	Name string
	// Type is "command" or "webhook".
	Type string
	// Argv is a command sink's program and arguments.
	Argv []string
	// URL, Headers: a webhook's address and fixed, non-secret headers.
	URL     string
	Headers map[string]string
	// SecretEnv names the daemon's environment variable whose value is
	// sent as the header SecretHeader ("Authorization" unless set): a
	// secret is never in the file.
	SecretEnv, SecretHeader string
}

var notifyKeys = map[string][]string{
	"command": {"type", "name", "argv"},
	"webhook": {"type", "name", "url", "headers", "secret_env", "secret_header"},
}

// parseNotify reads "notify", a list of sinks.
func parseNotify(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["notify"]
	if !ok {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf(`%w: "notify" must be a list of sinks such as [{"type": "command", "argv": ["notify-send", "warren"]}], got %s`, ErrInvalid, preview(raw))
	}
	names := map[string]bool{}
	for i, item := range list {
		s, err := parseSink(fmt.Sprintf("notify[%d]", i), item)
		if err != nil {
			return err
		}
		if names[s.Name] {
			return fmt.Errorf("%w: notify[%d]: two sinks are named %q; give each its own \"name\"", ErrInvalid, i, s.Name)
		}
		names[s.Name] = true
		cfg.Notify = append(cfg.Notify, s)
	}
	return nil
}

func parseSink(key string, raw json.RawMessage) (NotifySink, error) {
	obj, err := decodeObject(raw, key)
	if err != nil {
		return NotifySink{}, err
	}
	var s NotifySink
	if err := json.Unmarshal(obj["type"], &s.Type); err != nil || notifyKeys[s.Type] == nil {
		return s, fmt.Errorf(`%w: %q needs "type": "command" or "webhook", got %s`, ErrInvalid, key+".type", preview(obj["type"]))
	}
	for _, k := range sortedKeys(obj) {
		if !contains(notifyKeys[s.Type], k) {
			return s, fmt.Errorf("%w: unknown key %q in a %s sink%s; its keys are %s", ErrInvalid, key+"."+k, s.Type,
				suggestKey(k, notifyKeys[s.Type]), strings.Join(notifyKeys[s.Type], ", "))
		}
	}
	str := func(k string, dst *string) error {
		if v, ok := obj[k]; ok && json.Unmarshal(v, dst) != nil {
			return fmt.Errorf("%w: %q must be a string, got %s", ErrInvalid, key+"."+k, preview(v))
		}
		return nil
	}
	for k, dst := range map[string]*string{"name": &s.Name, "url": &s.URL, "secret_env": &s.SecretEnv, "secret_header": &s.SecretHeader} {
		if err := str(k, dst); err != nil {
			return s, err
		}
	}
	if s.Type == "command" {
		err = checkCommandSink(key, obj, &s)
	} else {
		err = checkWebhookSink(key, obj, &s)
	}
	if err != nil {
		return s, err
	}
	if s.Name == "" {
		h := sha256.Sum256([]byte(s.URL + "\x00" + strings.Join(s.Argv, "\x00")))
		s.Name = s.Type + "-" + hex.EncodeToString(h[:4])
	} else if err := checkName(key+".name", s.Name); err != nil {
		return s, err
	}
	return s, nil
}

func checkCommandSink(key string, obj map[string]json.RawMessage, s *NotifySink) error {
	if err := json.Unmarshal(obj["argv"], &s.Argv); err != nil || len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf(`%w: %q must be a program and its arguments, such as ["notify-send", "warren"], got %s`, ErrInvalid, key+".argv", preview(obj["argv"]))
	}
	for i, a := range s.Argv {
		if looksSecret(a) {
			return fmt.Errorf("%w: %s[%d] looks like a key; pass secrets through the environment, never in config.json", ErrInvalid, key+".argv", i)
		}
	}
	return nil
}

func checkWebhookSink(key string, obj map[string]json.RawMessage, s *NotifySink) error {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: %q must be an http(s) URL without user info, got %q", ErrInvalid, key+".url", s.URL)
	}
	if v, ok := obj["headers"]; ok {
		if err := json.Unmarshal(v, &s.Headers); err != nil {
			return fmt.Errorf("%w: %q must be an object of header names to strings, got %s", ErrInvalid, key+".headers", preview(v))
		}
	}
	for name, v := range s.Headers {
		if !validHeaderName(name) {
			return fmt.Errorf("%w: %q is not a valid header name", ErrInvalid, key+".headers."+name)
		}
		if looksSecret(v) || strings.EqualFold(name, "authorization") {
			return fmt.Errorf("%w: %q holds a secret; name the variable that holds it with \"secret_env\" instead", ErrInvalid, key+".headers."+name)
		}
	}
	if s.SecretEnv != "" {
		if err := checkName(key+".secret_env", s.SecretEnv); err != nil {
			return err
		}
		if s.SecretHeader == "" {
			s.SecretHeader = "Authorization"
		}
		if !validHeaderName(s.SecretHeader) {
			return fmt.Errorf("%w: %q is not a valid header name", ErrInvalid, key+".secret_header")
		}
	}
	return nil
}

func validHeaderName(name string) bool {
	return name != "" && http.CanonicalHeaderKey(name) != "" && !strings.ContainsAny(name, " \t\r\n:")
}
