package config

import (
	"errors"
	"strings"
	"testing"
)

func TestPrices(t *testing.T) {
	cfg, err := Parse([]byte(`{"prices": {"anthropic/claude-x": {"input_per_mtok": 3, "output_per_mtok": 15, "cache_read_per_mtok": 0.3, "cache_write_per_mtok": 3.75},
		"gpt-x": {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cache_read_per_mtok": 0.075, "cache_write_per_mtok": 0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := cfg.PriceOf("anthropic", "claude-x"); !ok || p.CacheWritePerMTok != 3.75 {
		t.Errorf("provider/model: %+v %v", p, ok)
	}
	if p, ok := cfg.PriceOf("openai", "gpt-x"); !ok || p.InputPerMTok != 0.15 {
		t.Errorf("model: %+v %v", p, ok)
	}
	if _, ok := cfg.PriceOf("openai", "claude-x"); ok {
		t.Error("a provider/model price applied to another provider")
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 2}}}`, "never guessed"},
		{`{"prices": {"m": {"input_per_mtok": -1, "output_per_mtok": 2, "cache_read_per_mtok": 0, "cache_write_per_mtok": 0}}}`, "from 0 to 100000"},
		{`{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 2, "cache_read_per_mtok": 0, "cache_write_per_mtok": 0, "input": 1}}}`, "unknown key"},
		{`{"prices": {"m": 3}}`, "object"},
	} {
		if _, err := Parse([]byte(bad.doc)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.doc, err, bad.want)
		}
	}
}
