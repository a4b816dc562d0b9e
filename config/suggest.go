package config

import "strings"

// closest returns the candidate nearest to s by edit distance, or "" when
// none is close enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
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

// editDistance is the Levenshtein distance between a and b, by runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// didYouMean formats a suggestion suffix, or "" when there is none.
func didYouMean(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return " (did you mean \"" + c + "\"?)"
	}
	return ""
}
