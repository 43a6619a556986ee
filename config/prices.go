package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Price is one model's price in US dollars per million tokens (SPEC 13):
// input (not read from or written to the cache), output, cache reads and
// cache writes. Every one is required: a price is never guessed.
type Price struct {
	InputPerMTok, OutputPerMTok, CacheReadPerMTok, CacheWritePerMTok float64
}

var priceKeys = []string{"input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok"}

// PriceOf is the price of provider entry prov's model: "prov/model" in
// "prices", else "model"; false when neither is there.
func (c Config) PriceOf(prov, model string) (Price, bool) {
	if p, ok := c.Prices[prov+"/"+model]; ok {
		return p, true
	}
	p, ok := c.Prices[model]
	return p, ok
}

// parsePrices reads "prices": "provider/model" or "model" -> a Price.
func parsePrices(cfg *Config, top map[string]json.RawMessage) error {
	raw, ok := top["prices"]
	if !ok {
		return nil
	}
	obj, err := decodeObject(raw, `"prices"`)
	if err != nil {
		return err
	}
	cfg.Prices = make(map[string]Price, len(obj))
	for _, name := range sortedKeys(obj) {
		key := "prices." + name
		if name == "" || strings.ContainsAny(name, " \t\n") {
			return fmt.Errorf("%w: %q: a price is keyed by \"provider/model\" or \"model\"", ErrInvalid, key)
		}
		fields, err := decodeObject(obj[name], key)
		if err != nil {
			return err
		}
		vals := make([]float64, len(priceKeys))
		for i, k := range priceKeys {
			v, ok := fields[k]
			if !ok {
				return fmt.Errorf("%w: %q needs %s (dollars per million tokens; 0 when the provider does not charge it): a price is never guessed",
					ErrInvalid, key, strings.Join(priceKeys, ", "))
			}
			if err := json.Unmarshal(v, &vals[i]); err != nil || vals[i] < 0 || vals[i] > 100_000 || math.IsNaN(vals[i]) {
				return fmt.Errorf("%w: %q must be a number of dollars per million tokens from 0 to 100000, got %s", ErrInvalid, key+"."+k, preview(v))
			}
		}
		for _, k := range sortedKeys(fields) {
			if !contains(priceKeys, k) {
				return fmt.Errorf("%w: unknown key %q%s; the keys are %s", ErrInvalid, key+"."+k, suggestKey(k, priceKeys), strings.Join(priceKeys, ", "))
			}
		}
		cfg.Prices[name] = Price{InputPerMTok: vals[0], OutputPerMTok: vals[1], CacheReadPerMTok: vals[2], CacheWritePerMTok: vals[3]}
	}
	return nil
}
