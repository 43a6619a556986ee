package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/schema"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// Config is warren's configuration (SPEC 10).
type Config struct {
	// Pools maps a multiplexer pool name to its number of live sessions.
	Pools map[string]int
	// ProviderPools maps a provider name to the pool its sessions use;
	// providers not listed use the "default" pool.
	ProviderPools map[string]string
	// MaxRetries is how often a transient provider error is retried.
	MaxRetries int
	// RetryBaseDelay is the first retry delay (doubled per attempt, with
	// jitter).
	RetryBaseDelay time.Duration
	// TurnTimeout bounds one provider turn.
	TurnTimeout time.Duration
	// Providers holds per-provider settings, by provider name.
	Providers map[string]ProviderConfig
	// Limits bounds message sizes and pending messages (config/limits.go).
	Limits Limits
	// Resume is the resume policy ("resume": ResumeAuto or ResumeManual)
	// for every entry that sets none; "" leaves each entry's type its
	// default (ResumePolicy).
	Resume string
	// Notify lists the notification sinks ("notify", SPEC 14; notify.go).
	Notify []NotifySink
	// HTTP is where the web console listens ("http", SPEC 14; http.go).
	HTTP HTTP
	// Prices are the models' prices ("prices", SPEC 13; prices.go).
	Prices map[string]Price
	// Budget is the default budget of new root agents ("budget", SPEC 13;
	// budget.go; nil: none).
	Budget *schema.BudgetSetData
}

// The resume policies (SPEC 4, "Resuming interrupted work").
const (
	ResumeAuto   = "auto"
	ResumeManual = "manual"
)

// ResumePolicy is the resume policy of provider entry name for an agent
// without a workspace (ResumePolicyFor).
func (c Config) ResumePolicy(name string) string { return c.ResumePolicyFor(name, false) }

// ResumePolicyFor is the resume policy of an agent of provider entry
// name: the entry's own "resume", else the file's, else the default:
// manual for an acp agent without a workspace (an agent CLI's own edits
// and commands would run twice), auto for the others (their tool calls
// are answered from the log; a workspace is restored first).
func (c Config) ResumePolicyFor(name string, workspace bool) string {
	p := c.Providers[name]
	if s, ok := p.Settings["resume"].(string); ok {
		return s
	}
	if c.Resume != "" {
		return c.Resume
	}
	if p.Type(name) == "acp" && !workspace {
		return ResumeManual
	}
	return ResumeAuto
}

// WantsWorkspace reports whether entry name gives every agent a
// workspace ("workspace": "worktree"), and the ignored files to copy
// into each ("copy").
func (c Config) WantsWorkspace(name string) (bool, []string) {
	p := c.Providers[name]
	var copies []string
	if list, ok := p.Settings["copy"].([]any); ok {
		for _, x := range list {
			if s, ok := x.(string); ok {
				copies = append(copies, s)
			}
		}
	}
	return p.Settings["workspace"] == "worktree", copies
}

// ProviderConfig is one provider's settings. It never holds an API key, only
// the name of the environment variable that does.
type ProviderConfig struct {
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// EnvPass names the daemon's environment variables (or prefixes
	// ending in '*') the entry's agent processes get besides the default
	// allow-list (provider.DefaultEnvAllow).
	EnvPass []string `json:"env_pass,omitempty"`
	// Env holds fixed, non-secret variables for the entry's agent
	// processes.
	Env map[string]string `json:"env,omitempty"`
	// Settings holds the other keys of the provider's entry, as decoded
	// JSON (numbers are json.Number).
	Settings map[string]any `json:"-"`
}

// DefaultPool is the pool of providers that provider_pools does not name.
const DefaultPool = "default"

// Limits on values; anything outside is rejected as a probable mistake.
const (
	MaxPoolSize          = 1024
	MaxMaxRetries        = 20
	MaxRetryBaseDelayMS  = 60_000
	MinTurnTimeoutS      = 1
	MaxTurnTimeoutS      = 7 * 24 * 3600
	MaxFileSize          = 1 << 20
	maxNameLen           = 64
	defaultRetryDelayMS  = 500
	defaultTurnTimeoutS  = 600
	defaultMaxRetries    = 3
	defaultPoolSize      = 4
	defaultScriptedPool  = 32
	scriptedProviderName = "scripted"
)

// ErrInvalid is wrapped by every error about the content of a config file.
var ErrInvalid = errors.New("invalid config")

// Default returns the built-in configuration: pools {"default":4,
// "scripted":32}, provider_pools {"scripted":"scripted"}, max_retries 3,
// retry_base_delay_ms 500, turn_timeout_s 600, no provider settings.
func Default() Config {
	return Config{
		Pools:          map[string]int{DefaultPool: defaultPoolSize, scriptedProviderName: defaultScriptedPool},
		ProviderPools:  map[string]string{scriptedProviderName: scriptedProviderName},
		MaxRetries:     defaultMaxRetries,
		RetryBaseDelay: defaultRetryDelayMS * time.Millisecond,
		TurnTimeout:    defaultTurnTimeoutS * time.Second,
		Providers:      map[string]ProviderConfig{},
		Limits:         DefaultLimits(),
	}
}

// PoolFor returns the pool a provider's sessions use.
func (c Config) PoolFor(provider string) string {
	if p, ok := c.ProviderPools[provider]; ok {
		return p
	}
	return DefaultPool
}

// Load reads and parses the config file at path. A missing file gives the
// defaults and no error. Errors about the content wrap ErrInvalid and name
// the file.
func Load(fsys faultfs.FS, path string) (Config, error) {
	data, err := readLimited(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

func readLimited(fsys faultfs.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: file is larger than %d bytes; a config file is a few hundred bytes", ErrInvalid, MaxFileSize)
	}
	return data, nil
}

// MarshalJSON writes the config in the file format of config.json.
func (c Config) MarshalJSON() ([]byte, error) {
	providers := make(map[string]map[string]any, len(c.Providers))
	for name, p := range c.Providers {
		m := make(map[string]any, len(p.Settings)+2)
		for k, v := range p.Settings {
			m[k] = v
		}
		if p.BaseURL != "" {
			m["base_url"] = p.BaseURL
		}
		if p.APIKeyEnv != "" {
			m["api_key_env"] = p.APIKeyEnv
		}
		if len(p.EnvPass) > 0 {
			m["env_pass"] = p.EnvPass
		}
		if len(p.Env) > 0 {
			m["env"] = p.Env
		}
		providers[name] = m
	}
	return json.Marshal(struct {
		Pools          map[string]int            `json:"pools"`
		ProviderPools  map[string]string         `json:"provider_pools"`
		MaxRetries     int                       `json:"max_retries"`
		RetryBaseDelay int64                     `json:"retry_base_delay_ms"`
		TurnTimeout    int64                     `json:"turn_timeout_s"`
		Providers      map[string]map[string]any `json:"providers"`
		Limits         map[string]int64          `json:"limits"`
	}{c.Pools, c.ProviderPools, c.MaxRetries, c.RetryBaseDelay.Milliseconds(), int64(c.TurnTimeout / time.Second), providers, c.Limits.marshalMap()})
}

// isBlank reports whether data holds only white space.
func isBlank(data []byte) bool { return len(bytes.TrimSpace(data)) == 0 }
