package config

import (
	"strings"

	"github.com/opentalon/opentalon/core"
)

// closest returns the candidate nearest to s by edit distance, or "" when
// none is close enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := core.EditDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return ""
	}
	limit := len([]rune(s)) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD > limit || bestD >= len([]rune(best)) {
		return ""
	}
	return best
}

// didYouMean formats a suggestion suffix, or "" when there is none.
func didYouMean(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return " (did you mean \"" + c + "\"?)"
	}
	return ""
}
