package llm

import (
	"regexp"
	"strconv"
	"strings"
)

// KeyLeak returns a run of 8 characters of key found in s as it is or
// once a reader undoes its escapes (JSON, percent, HTML), "" when there is
// none. The decoding is written apart from the redactor's own. Tests of
// package llm_test use it too.
func KeyLeak(s, key string) string {
	if run := keyRuns(s, key); run != "" {
		return run
	}
	return keyRuns(decodeAll(s), key)
}

// keyRuns reports any run of 8 or more characters of key in s.
func keyRuns(s, key string) string {
	for i := 0; i+8 <= len(key); i++ {
		if strings.Contains(s, key[i:i+8]) {
			return key[i : i+8]
		}
	}
	return ""
}

var (
	jsonU  = regexp.MustCompile(`\\+[uU]([0-9a-fA-F]{4})|\\+x([0-9a-fA-F]{2})`)
	entity = regexp.MustCompile(`&#([xX][0-9a-fA-F]{1,6}|[0-9]{1,7});?`)
	pct    = regexp.MustCompile(`%([0-9a-fA-F]{2})`)
)

// decodeAll undoes, three times over, the escapes a reader could undo
// (test side, written apart from the redactor's decoder).
func decodeAll(s string) string {
	for range 4 {
		s = jsonU.ReplaceAllStringFunc(s, func(m string) string {
			h := m[strings.LastIndexAny(m, "uUx")+1:]
			v, _ := strconv.ParseUint(h, 16, 32)
			return string(rune(v))
		})
		s = strings.NewReplacer(`\/`, "/", `\"`, `"`).Replace(s)
		s = entity.ReplaceAllStringFunc(s, func(m string) string {
			d := strings.TrimSuffix(m[2:], ";")
			b := 10
			if d[0] == 'x' || d[0] == 'X' {
				d, b = d[1:], 16
			}
			v, _ := strconv.ParseUint(d, b, 32)
			return string(rune(v))
		})
		s = pct.ReplaceAllStringFunc(s, func(m string) string {
			v, _ := strconv.ParseUint(m[1:], 16, 8)
			return string(rune(v))
		})
	}
	return s
}
