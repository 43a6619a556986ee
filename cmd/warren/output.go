package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Errorf("encode the result as JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// jsonable converts values decoded from msgpack (map[any]any, []byte) into
// ones encoding/json accepts.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonable(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = jsonable(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonable(x)
		}
		return out
	case []byte:
		return string(t)
	}
	return v
}

// str returns m[k] as a string ("" when absent or null).
func str(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// num returns m[k] as an int64 (0 when absent or not a number).
func num(m map[string]any, k string) int64 {
	switch v := m[k].(type) {
	case int:
		return int64(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case uint:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	case float32:
		return int64(v)
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// obj returns m[k] as a map (nil when absent or not a map).
func obj(m map[string]any, k string) map[string]any {
	if v, ok := jsonable(m[k]).(map[string]any); ok {
		return v
	}
	return nil
}

// list returns m[k] as a list of maps (entries that are not maps skipped).
func list(m map[string]any, k string) []map[string]any {
	raw, _ := m[k].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, x := range raw {
		if mm, ok := jsonable(x).(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// table writes rows aligned in columns separated by two spaces.
func table(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	all := append([][]string{header}, rows...)
	for _, r := range all {
		for i, cell := range r {
			if i < len(widths) && utf8.RuneCountInString(cell) > widths[i] {
				widths[i] = utf8.RuneCountInString(cell)
			}
		}
	}
	for _, r := range all {
		var b strings.Builder
		for i, cell := range r {
			if i == len(r)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// cut shortens s to n runes, marking the cut, and flattens newlines.
func cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// kvPairs renders a JSON object as `k=v` pairs in key order, values cut to
// maxVal runes.
func kvPairs(data json.RawMessage, maxVal int) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		if len(data) == 0 {
			return ""
		}
		return cut(string(data), maxVal)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+fmtValue(m[k], maxVal))
	}
	return strings.Join(parts, " ")
}

func fmtValue(raw json.RawMessage, maxVal int) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" || strings.ContainsAny(s, " \t\n\"") {
			return cut(strconv.Quote(s), maxVal)
		}
		return cut(s, maxVal)
	}
	return cut(string(raw), maxVal)
}

// clock formats an RFC 3339 timestamp as local HH:MM:SS (or the input when
// it does not parse).
func clock(ts string, millis bool) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return clockT(t, millis)
}

func clockT(t time.Time, millis bool) string {
	if millis {
		return t.Local().Format("15:04:05.000")
	}
	return t.Local().Format("15:04:05")
}

// treeNode is one agent in `warren agent tree`.
type treeNode struct {
	label    string
	children []*treeNode
}

// renderTree draws roots and their descendants with box-drawing characters.
func renderTree(w io.Writer, roots []*treeNode) {
	for _, r := range roots {
		fmt.Fprintln(w, r.label)
		renderChildren(w, r.children, "")
	}
}

func renderChildren(w io.Writer, kids []*treeNode, prefix string) {
	for i, k := range kids {
		last := i == len(kids)-1
		branch, next := "├── ", "│   "
		if last {
			branch, next = "└── ", "    "
		}
		fmt.Fprintln(w, prefix+branch+k.label)
		renderChildren(w, k.children, prefix+next)
	}
}
