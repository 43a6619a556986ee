package config

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/warren-dev/warren/schema"
)

// DefaultBudget is the budget of a new root agent of provider entry prov:
// the entry's "budget", else the file's (nil: none; SPEC 13).
func (c Config) DefaultBudget(prov string) *schema.BudgetSetData {
	if m, ok := c.Providers[prov].Settings["budget"].(map[string]any); ok {
		if b, err := budgetOf(m); err == nil {
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
	b, err := budgetOf(m)
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
	if _, err := budgetOf(m); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrInvalid, key+".budget", err)
	}
	return nil
}

// budgetOf reads {tokens?, usd?, turns?}: whole numbers of tokens and
// turns, dollars, each 0 or more.
func budgetOf(m map[string]any) (*schema.BudgetSetData, error) {
	b := &schema.BudgetSetData{By: schema.ByOperator}
	for k, v := range m {
		f, err := number(v)
		if err != nil || f < 0 || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s must be a number of 0 or more, got %v", k, v)
		}
		switch k {
		case "tokens", "turns":
			if f != math.Trunc(f) {
				return nil, fmt.Errorf("%s must be a whole number, got %v", k, v)
			}
			n := int64(f)
			if k == "tokens" {
				b.Tokens = &n
			} else {
				b.Turns = &n
			}
		case "usd":
			b.USD = &f
		default:
			return nil, fmt.Errorf("unknown key %q; the keys are tokens, usd, turns", k)
		}
	}
	return b, nil
}

func number(v any) (float64, error) {
	switch n := v.(type) {
	case json.Number:
		return n.Float64()
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("not a number")
}
