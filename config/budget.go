package config

import (
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/schema"
)

// DefaultBudget is the budget of a new root agent of provider entry prov:
// the entry's "budget", else the file's (nil: none; SPEC 13).
func (c Config) DefaultBudget(prov string) *schema.BudgetSetData {
	if m, ok := c.Providers[prov].Settings["budget"].(map[string]any); ok {
		if b, err := schema.ParseBudget(m); err == nil {
			return b
		}
	}
	if c.Budget == nil {
		return nil
	}
	b := *c.Budget
	return &b
}

// ReportsUsage says whether the agents of provider entry prov report
// their token usage (SPEC 13): the entry's "usage" setting, else false for
// the built-in gemini entry (Gemini CLI reports none over ACP), else true.
// An entry that reports none can have a turns budget only.
func (c Config) ReportsUsage(prov string) bool {
	if v, ok := c.Providers[prov].Settings["usage"].(bool); ok {
		return v
	}
	return prov != "gemini"
}

// parseBudgetKey reads the file's "budget".
func parseBudgetKey(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["budget"]
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf(`%w: "budget" must be an object such as {"tokens": 2000000, "usd": 20, "turns": 500}, got %s`, ErrInvalid, preview(raw))
	}
	b, err := schema.ParseBudget(m)
	if err != nil {
		return fmt.Errorf("%w: \"budget\": %v", ErrInvalid, err)
	}
	cfg.Budget = b
	return nil
}

// checkBudgetSetting validates a provider entry's "budget" and "usage".
func checkBudgetSetting(key string, settings map[string]any) error {
	if v, ok := settings["usage"]; ok {
		if _, isBool := v.(bool); !isBool {
			return fmt.Errorf("%w: %q must be true or false (whether the entry's agents report token usage), got %v", ErrInvalid, key+".usage", v)
		}
	}
	v, ok := settings["budget"]
	if !ok {
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return fmt.Errorf("%w: %q must be an object such as {\"tokens\": 2000000}, got %v", ErrInvalid, key+".budget", v)
	}
	if _, err := schema.ParseBudget(m); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrInvalid, key+".budget", err)
	}
	return nil
}
