package config

import (
	"encoding/json"
	"fmt"
	"strings"
)

// reservedEnv are the variables the daemon sets for agent processes itself;
// a provider entry cannot set them.
var reservedEnv = []string{"WARREN_SOCKET", "WARREN_AGENT_ID", "WARREN_AGENT_CREDENTIAL", "WARREN_AGENT_PROCESS"}

// secretValuePrefixes are how well-known API keys and tokens begin; an env
// value starting with one is refused as a literal credential.
var secretValuePrefixes = []string{"sk-", "sk_", "pk_live_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
	"github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "AKIA", "ASIA", "AIza", "hf_", "npm_", "eyJ"}

// parseEnvPass decodes env_pass: names (or prefixes ending in '*') of the
// daemon's environment variables to pass to the entry's agent processes.
func parseEnvPass(key string, raw json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%w: %q must be a list of variable names (\"NAME\" or \"PREFIX_*\"), got %s", ErrInvalid, key, preview(raw))
	}
	for i, p := range list {
		name := strings.TrimSuffix(p, "*")
		if !isEnvName(name) {
			return nil, fmt.Errorf("%w: %s[%d] = %q: give a variable name or a prefix followed by '*' (e.g. \"MYTOOL_*\"); a bare \"*\" would pass the whole environment, keys included", ErrInvalid, key, i, p)
		}
	}
	return list, nil
}

// parseEnv decodes env: fixed, non-secret variables for the entry's agent
// processes.
func parseEnv(key string, raw json.RawMessage) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: %q must be an object of variable names to string values, got %s", ErrInvalid, key, preview(raw))
	}
	for _, k := range sortedKeys(m) {
		fk := key + "." + k
		switch {
		case !isEnvName(k):
			return nil, fmt.Errorf("%w: %q: variable names use letters, digits and underscores and do not start with a digit", ErrInvalid, fk)
		case contains(reservedEnv, k):
			return nil, fmt.Errorf("%w: %q: the daemon sets %s itself", ErrInvalid, fk, k)
		case isSecretName(k) || looksSecret(m[k]):
			return nil, fmt.Errorf("%w: %q looks like a literal credential; config.json must never hold keys: pass the variable from the daemon's environment with %q instead (e.g. \"env_pass\": [%q])", ErrInvalid, fk, strings.TrimSuffix(key, ".env")+".env_pass", k)
		}
	}
	return m, nil
}

// looksSecret reports whether a value starts like a well-known key.
func looksSecret(v string) bool {
	for _, p := range secretValuePrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}
