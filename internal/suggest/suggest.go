// Package suggest finds the known word closest to a mistyped one, for
// "did you mean" hints in error messages.
package suggest

import "strings"

// Closest returns the candidate nearest to word (case-insensitive) within
// maxDist edits, or "" when none is that close. Words over 64 bytes get no
// suggestion.
func Closest(word string, candidates []string, maxDist int) string {
	if len(word) > 64 {
		return ""
	}
	best, bestD := "", maxDist+1
	w := strings.ToLower(word)
	for _, c := range candidates {
		if d := Distance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
