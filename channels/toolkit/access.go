package toolkit

import "strings"

// Access is an allowlist: an empty list allows everyone. Entries are
// compared case-insensitively and without a leading "@", so a list may
// hold user ids and, where the platform has them, usernames.
type Access struct {
	set map[string]bool
}

// NewAccess builds an allowlist from config entries.
func NewAccess(entries []string) Access {
	a := Access{}
	for _, e := range entries {
		if k := accessKey(e); k != "" {
			if a.set == nil {
				a.set = map[string]bool{}
			}
			a.set[k] = true
		}
	}
	return a
}

func accessKey(s string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "@"))
}

// Open reports an empty list: everyone is allowed.
func (a Access) Open() bool { return len(a.set) == 0 }

// Allows reports whether any of ids (a user's id, their username, ...) is
// on the list; an empty list allows all. Empty ids never match.
func (a Access) Allows(ids ...string) bool {
	if a.Open() {
		return true
	}
	for _, id := range ids {
		if k := accessKey(id); k != "" && a.set[k] {
			return true
		}
	}
	return false
}
