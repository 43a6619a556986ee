package protocol

import (
	"encoding/json"
	"math"
	"strconv"
)

// Params are the params of a request. JSON requests decode numbers as
// float64; native (msgpack) requests decode integers as int64 or uint64 and
// floats as float64. The typed accessors accept all of these and return an
// *Error with CodeInvalid naming the param when a value is missing or has the
// wrong type.
type Params map[string]any

// Has reports whether key is present with a non-null value.
func (p Params) Has(key string) bool {
	v, ok := p[key]
	return ok && v != nil
}

// String returns the required string param key.
func (p Params) String(key string) (string, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return "", missing(key, "a string")
	}
	s, ok := v.(string)
	if !ok {
		return "", mistyped(key, "a string", v)
	}
	return s, nil
}

// OptString returns the string param key, or def when it is absent or null.
func (p Params) OptString(key, def string) (string, error) {
	if !p.Has(key) {
		return def, nil
	}
	return p.String(key)
}

// Int returns the required integer param key. Floats with an integral value
// (JSON numbers) are accepted; fractions and out-of-range values are not.
func (p Params) Int(key string) (int, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return 0, missing(key, "an integer")
	}
	n, ok := toInt(v)
	if !ok {
		return 0, mistyped(key, "an integer", v)
	}
	return n, nil
}

// OptInt returns the integer param key, or def when it is absent or null.
func (p Params) OptInt(key string, def int) (int, error) {
	if !p.Has(key) {
		return def, nil
	}
	return p.Int(key)
}

// OptBool returns the boolean param key, or def when it is absent or null.
func (p Params) OptBool(key string, def bool) (bool, error) {
	if !p.Has(key) {
		return def, nil
	}
	b, ok := p[key].(bool)
	if !ok {
		return false, mistyped(key, "a boolean", p[key])
	}
	return b, nil
}

// Map returns the required object param key.
func (p Params) Map(key string) (map[string]any, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return nil, missing(key, "an object")
	}
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case Params:
		return m, nil
	}
	return nil, mistyped(key, "an object", v)
}

// OptMap returns the object param key, or nil when it is absent or null.
func (p Params) OptMap(key string) (map[string]any, error) {
	if !p.Has(key) {
		return nil, nil
	}
	return p.Map(key)
}

func missing(key, want string) *Error {
	return Errorf(CodeInvalid, "missing required param %q (%s)", key, want)
}

func mistyped(key, want string, got any) *Error {
	return Errorf(CodeInvalid, "param %q must be %s, got %s", key, want, typeName(got))
}

// typeName names a decoded value's type in wire terms.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float32, float64:
		if f, _ := toFloat(x); f != math.Trunc(f) {
			return "a fractional number"
		}
		return "a number"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return "a number"
	case map[string]any, Params:
		return "an object"
	case []any:
		return "an array"
	}
	return "an unsupported value"
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// toInt converts any decoded numeric value with an integral value that fits
// in an int.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int8:
		return int(x), true
	case int16:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		if int64(int(x)) != x {
			return 0, false
		}
		return int(x), true
	case uint:
		if x > math.MaxInt {
			return 0, false
		}
		return int(x), true
	case uint8:
		return int(x), true
	case uint16:
		return int(x), true
	case uint32:
		if uint64(x) > math.MaxInt {
			return 0, false
		}
		return int(x), true
	case uint64:
		if x > math.MaxInt {
			return 0, false
		}
		return int(x), true
	case float32, float64:
		f, _ := toFloat(x)
		// 2^63 is not representable as int; everything strictly inside is.
		if f != math.Trunc(f) || f >= math.MaxInt64 || f < math.MinInt64 || math.IsNaN(f) {
			return 0, false
		}
		return int(f), true
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 0); err == nil {
			return int(n), true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, false
		}
		return toInt(f)
	}
	return 0, false
}
