package schema

import (
	"encoding/json"
	"fmt"
	"math"
)

// maxBudget bounds a budget's numbers (an int64 holds it exactly).
const maxBudget = 1e15

// ParseBudget reads a budget object {tokens?, usd?, turns?} (SPEC 13):
// tokens and turns whole numbers, usd dollars, each from 0 to 1e15; a
// null member is not given. Numbers may be float64, json.Number or Go
// integers (each decoder's kind). By is ByOperator. It is an error when
// none is given or a key is unknown; the caller prefixes the error with
// where the object was.
func ParseBudget(m map[string]any) (*BudgetSetData, error) {
	b := &BudgetSetData{By: ByOperator}
	for k, raw := range m {
		if raw == nil {
			continue
		}
		if k != "tokens" && k != "usd" && k != "turns" {
			return nil, fmt.Errorf("unknown key %q; the keys are tokens, usd, turns", k)
		}
		f, ok := budgetNumber(raw)
		if !ok || f < 0 || f > maxBudget || math.IsNaN(f) {
			return nil, fmt.Errorf("%s must be a number from 0 to 1e15, got %v", k, raw)
		}
		if k == "usd" {
			b.USD = &f
			continue
		}
		if f != math.Trunc(f) {
			return nil, fmt.Errorf("%s must be a whole number, got %v", k, raw)
		}
		n := int64(f)
		if k == "tokens" {
			b.Tokens = &n
		} else {
			b.Turns = &n
		}
	}
	if b.Tokens == nil && b.USD == nil && b.Turns == nil {
		return nil, fmt.Errorf("give tokens, usd or turns")
	}
	return b, nil
}

func budgetNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
