package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warren-dev/warren/internal/suggest"
)

// topKeys are the keys config.json may have.
var topKeys = []string{"pools", "provider_pools", "max_retries", "retry_base_delay_ms", "turn_timeout_s", "providers", "limits", "resume", "notify", "http", "prices", "budget"}

// providerKeys are the keys a provider entry may have (SPEC 10; env_pass,
// context_budget and history are warren's).
var providerKeys = []string{"type", "base_url", "api_key_env", "env_pass", "env", "model", "max_tokens", "timeout_s",
	"context_budget", "headers", "command", "mode", "permissions", "history", "resume", "workspace", "copy", "sandbox", "budget", "usage", "worker"}

// Parse parses the content of config.json and merges it over Default():
// every key is optional; pools and provider_pools entries are added to (or
// replace) the default entries; providers replaces nothing (there are no
// default provider settings). An empty document gives the defaults. Errors
// wrap ErrInvalid and name the key, what was found and what is expected.
func Parse(data []byte) (Config, error) {
	cfg := Default()
	if isBlank(data) {
		return cfg, nil
	}
	top, err := decodeObject(data, "the config file")
	if err != nil {
		return Config{}, err
	}
	for _, k := range sortedKeys(top) {
		if !contains(topKeys, k) {
			return Config{}, fmt.Errorf("%w: unknown key %q%s; the keys are %s", ErrInvalid, k, suggestKey(k, topKeys), strings.Join(topKeys, ", "))
		}
	}
	// In the order their errors are reported; checkProviderPools after
	// both maps are merged, so the order of keys in the file does not
	// matter.
	for _, step := range [...]func(*Config, map[string]json.RawMessage) error{
		parsePools, parseProviderPools, checkProviderPools, parseRetryAndTimeout, parseLimitsKey, parseResume, parseProviders, parseNotify, parseHTTP, parsePrices, parseBudgetKey,
	} {
		if err := step(&cfg, top); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// parsePools merges "pools" into cfg.Pools.
func parsePools(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["pools"]
	if !ok {
		return nil
	}
	pools, err := decodeObject(raw, `"pools"`)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(pools) {
		key := "pools." + name
		if err := checkName(key, name); err != nil {
			return err
		}
		n, err := intValue(key, pools[name], 1, MaxPoolSize)
		if err != nil {
			return err
		}
		cfg.Pools[name] = int(n)
	}
	return nil
}

// parseProviderPools merges "provider_pools" into cfg.ProviderPools.
func parseProviderPools(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["provider_pools"]
	if !ok {
		return nil
	}
	pp, err := decodeObject(raw, `"provider_pools"`)
	if err != nil {
		return err
	}
	for _, prov := range sortedKeys(pp) {
		key := "provider_pools." + prov
		if err := checkName(key, prov); err != nil {
			return err
		}
		var pool string
		if err := json.Unmarshal(pp[prov], &pool); err != nil {
			return fmt.Errorf("%w: %q must be the name of a pool (a string), got %s", ErrInvalid, key, preview(pp[prov]))
		}
		cfg.ProviderPools[prov] = pool
	}
	return nil
}

// checkProviderPools checks that every pool named by provider_pools
// exists.
func checkProviderPools(cfg *Config, _ map[string]json.RawMessage) error {
	for _, prov := range sortedKeys(cfg.ProviderPools) {
		if pool := cfg.ProviderPools[prov]; cfg.Pools[pool] == 0 {
			return fmt.Errorf("%w: %q names pool %q, which does not exist; add it to \"pools\" (pools are %s)", ErrInvalid, "provider_pools."+prov, pool, strings.Join(sortedKeys(cfg.Pools), ", "))
		}
	}
	return nil
}

// parseRetryAndTimeout reads max_retries, retry_base_delay_ms and
// turn_timeout_s.
func parseRetryAndTimeout(cfg *Config, top map[string]json.RawMessage) error {
	if raw, ok := top["max_retries"]; ok {
		n, err := intValue("max_retries", raw, 0, MaxMaxRetries)
		if err != nil {
			return err
		}
		cfg.MaxRetries = int(n)
	}
	if raw, ok := top["retry_base_delay_ms"]; ok {
		n, err := intValue("retry_base_delay_ms", raw, 0, MaxRetryBaseDelayMS)
		if err != nil {
			return err
		}
		cfg.RetryBaseDelay = time.Duration(n) * time.Millisecond
	}
	if raw, ok := top["turn_timeout_s"]; ok {
		n, err := intValue("turn_timeout_s", raw, MinTurnTimeoutS, MaxTurnTimeoutS)
		if err != nil {
			return err
		}
		cfg.TurnTimeout = time.Duration(n) * time.Second
	}
	return nil
}

// parseLimitsKey merges "limits" into cfg.Limits.
func parseLimitsKey(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["limits"]
	if !ok {
		return nil
	}
	limits, err := parseLimits(cfg.Limits, raw)
	if err != nil {
		return err
	}
	cfg.Limits = limits
	return nil
}

// parseResume reads "resume", the resume policy of every entry that sets
// none.
func parseResume(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["resume"]
	if !ok {
		return nil
	}
	s, err := resumeValue("resume", raw)
	cfg.Resume = s
	return err
}

// resumeValue reads a resume policy ("auto" or "manual").
func resumeValue(key string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || (s != ResumeAuto && s != ResumeManual) {
		return "", fmt.Errorf("%w: %q must be %q (re-run interrupted runs by themselves) or %q (leave them for `warren agent resume`), got %s",
			ErrInvalid, key, ResumeAuto, ResumeManual, preview(raw))
	}
	return s, nil
}

// parseProviders reads "providers" into cfg.Providers.
func parseProviders(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["providers"]
	if !ok {
		return nil
	}
	provs, err := decodeObject(raw, `"providers"`)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(provs) {
		p, err := parseProvider(name, provs[name])
		if err != nil {
			return err
		}
		cfg.Providers[name] = p
	}
	return nil
}

func parseProvider(name string, raw json.RawMessage) (ProviderConfig, error) {
	key := "providers." + name
	if err := checkName(key, name); err != nil {
		return ProviderConfig{}, err
	}
	fields, err := decodeObject(raw, strconv.Quote(key))
	if err != nil {
		return ProviderConfig{}, err
	}
	if err := checkEntryKeys(key, raw, fields); err != nil {
		return ProviderConfig{}, err
	}
	var p ProviderConfig
	for _, k := range sortedKeys(fields) {
		fk := key + "." + k
		if !contains(providerKeys, k) {
			return ProviderConfig{}, fmt.Errorf("%w: unknown key %q%s; a provider entry's keys are %s", ErrInvalid, fk,
				suggestKey(k, providerKeys), strings.Join(providerKeys, ", "))
		}
		if k == "resume" {
			if _, err := resumeValue(fk, fields[k]); err != nil {
				return ProviderConfig{}, err
			}
		}
		switch k {
		case "base_url":
			if err := json.Unmarshal(fields[k], &p.BaseURL); err != nil {
				return ProviderConfig{}, fmt.Errorf("%w: %q must be a URL string, got %s", ErrInvalid, fk, preview(fields[k]))
			}
			if err := checkURL(fk, p.BaseURL); err != nil {
				return ProviderConfig{}, err
			}
		case "api_key_env":
			if err := json.Unmarshal(fields[k], &p.APIKeyEnv); err != nil || !isEnvName(p.APIKeyEnv) {
				return ProviderConfig{}, fmt.Errorf("%w: %q must be the NAME of an environment variable (letters, digits, underscores, e.g. \"OPENAI_API_KEY\"), not the key itself", ErrInvalid, fk)
			}
		case "env_pass":
			if p.EnvPass, err = parseEnvPass(fk, fields[k]); err != nil {
				return ProviderConfig{}, err
			}
		case "env":
			if p.Env, err = parseEnv(fk, fields[k]); err != nil {
				return ProviderConfig{}, err
			}
		default:
			var v any
			dec := json.NewDecoder(bytes.NewReader(fields[k]))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return ProviderConfig{}, fmt.Errorf("%w: %q: %w", ErrInvalid, fk, err)
			}
			if p.Settings == nil {
				p.Settings = map[string]any{}
			}
			p.Settings[k] = v
		}
	}

	if err := checkTyped(key, name, p.Settings); err != nil {
		return ProviderConfig{}, err
	}
	return p, nil
}

// checkEntryKeys refuses, in provider entry key (raw, decoded as
// fields), a misspelt key that only looks like a credential by its ending
// (max_token: a typo, said as one), then a literal credential under any
// key, nested anywhere.
func checkEntryKeys(key string, raw json.RawMessage, fields map[string]json.RawMessage) error {
	for _, k := range sortedKeys(fields) {
		if !contains(providerKeys, k) && !contains(secretNames, normalKey(k)) {
			if best := suggest.Closest(k, providerKeys, 2); best != "" {
				return fmt.Errorf("%w: unknown key %q (did you mean %q?); a provider entry's keys are %s", ErrInvalid,
					key+"."+k, best, strings.Join(providerKeys, ", "))
			}
		}
	}
	var all map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&all); err == nil {
		if bad := secretField(key, all); bad != "" {
			return errLiteralCredential(bad, key)
		}
	}
	return nil
}

// errLiteralCredential refuses the setting at path, which looks like a
// key, in provider entry key.
func errLiteralCredential(path, key string) error {
	return fmt.Errorf("%w: %q looks like a literal credential; config.json must never hold keys: put the key in an environment variable and name it with %q (e.g. \"api_key_env\": \"MY_PROVIDER_KEY\")", ErrInvalid, path, key+".api_key_env")
}

// secretField returns the path of the first setting (searched recursively,
// in key order) whose name says it holds a credential, or "".
func secretField(prefix string, settings map[string]any) string {
	for _, k := range sortedKeys(settings) {
		path := prefix + "." + k
		if isSecretName(k) {
			return path
		}
		switch v := settings[k].(type) {
		case map[string]any:
			if bad := secretField(path, v); bad != "" {
				return bad
			}
		case []any:
			for i, e := range v {
				if m, ok := e.(map[string]any); ok {
					if bad := secretField(fmt.Sprintf("%s[%d]", path, i), m); bad != "" {
						return bad
					}
				}
			}
		}
	}
	return ""
}

var secretNames = []string{"api_key", "apikey", "key", "token", "secret", "password", "passwd",
	"access_token", "auth_token", "bearer", "bearer_token", "client_secret", "private_key",
	"secret_key", "access_key", "authorization", "credentials", "credential"}

// normalKey is k lower-cased with '-' as '_', as secret names are
// compared.
func normalKey(k string) string { return strings.ToLower(strings.ReplaceAll(k, "-", "_")) }

func isSecretName(k string) bool {
	n := normalKey(k)
	if contains(secretNames, n) {
		return true
	}
	for _, suf := range []string{"_key", "_token", "_secret", "_password"} {
		if strings.HasSuffix(n, suf) {
			return true
		}
	}
	return false
}

func isEnvName(s string) bool {
	if s == "" || len(s) > 128 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func checkURL(key, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q must be an http:// or https:// URL with a host, got %q", ErrInvalid, key, s)
	}
	if u.User != nil {
		return fmt.Errorf("%w: %q must not contain user credentials; use api_key_env", ErrInvalid, key)
	}
	return nil
}

func checkName(key, name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: %q: names must be 1 to %d characters", ErrInvalid, key, maxNameLen)
	}
	for _, c := range name {
		if c != '_' && c != '-' && c != '.' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return fmt.Errorf("%w: %q: names may use letters, digits, '_', '-' and '.', found %q", ErrInvalid, key, c)
		}
	}
	return nil
}

// decodeObject decodes a JSON object into its raw members, rejecting any
// other value and trailing data.
func decodeObject(data []byte, what string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s must be a JSON object: %w", ErrInvalid, what, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: %s must be a JSON object, got null", ErrInvalid, what)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s has data after its closing brace", ErrInvalid, what)
	}
	return m, nil
}

// intValue decodes a whole number in [min, max].
func intValue(key string, raw json.RawMessage, min, max int64) (int64, error) {
	want := fmt.Sprintf("a whole number from %d to %d", min, max)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var num json.Number
	if err := dec.Decode(&num); err != nil {
		return 0, fmt.Errorf("%w: %q must be %s, got %s", ErrInvalid, key, want, preview(raw))
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, fmt.Errorf("%w: %q must be %s, got %s", ErrInvalid, key, want, preview(raw))
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil {
		// Accept an integral number written as a float (2.0, 1e3).
		f, ferr := strconv.ParseFloat(num.String(), 64)
		if ferr != nil || f != math.Trunc(f) || f < float64(min) || f > float64(max) {
			return 0, fmt.Errorf("%w: %q must be %s, got %s", ErrInvalid, key, want, preview(raw))
		}
		n = int64(f)
	}
	if n < min || n > max {
		return 0, fmt.Errorf("%w: %q must be %s, got %d", ErrInvalid, key, want, n)
	}
	return n, nil
}

// preview shows a short form of a raw JSON value in an error.
func preview(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggestKey proposes the known key closest to k, for typos.
func suggestKey(k string, known []string) string {
	best := suggest.Closest(k, known, 3)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
