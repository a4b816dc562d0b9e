package toolkit

import (
	"log/slog"
	"sort"
	"strings"
)

// Access is an allowlist: an empty list allows everyone. It keeps a
// platform's ids and its names apart, so a user whose name is spelled
// like an allowed user's id is not taken for them: an entry written
// "@name" is a name and is checked against names only; any other entry is
// an id when isID says it has the shape of one of the platform's ids,
// else a name (a username written without "@"). Entries are compared
// case-insensitively. Ids are what operators should list: a name can be
// changed, and then taken by someone else.
type Access struct {
	ids, names map[string]bool
}

// NewAccess builds an allowlist from config entries; isID tells the
// platform's ids (nil: every entry without "@" is an id).
func NewAccess(entries []string, isID func(string) bool) Access {
	a := Access{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		name, isName := strings.CutPrefix(e, "@")
		if !isName && isID != nil && !isID(e) {
			isName = true
		}
		k := strings.ToLower(name)
		if k == "" {
			continue
		}
		if isName {
			a.names = setAdd(a.names, k)
		} else {
			a.ids = setAdd(a.ids, k)
		}
	}
	return a
}

func setAdd(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

// Open reports an empty list: everyone is allowed.
func (a Access) Open() bool { return len(a.ids) == 0 && len(a.names) == 0 }

// Allows reports whether the user with this id, and this name where the
// platform has names ("" = none), is on the list; an empty list allows
// all. The id is checked against the ids, the name against the names.
func (a Access) Allows(id, name string) bool {
	if a.Open() {
		return true
	}
	id, name = strings.ToLower(strings.TrimSpace(id)), strings.ToLower(strings.TrimPrefix(strings.TrimSpace(name), "@"))
	return id != "" && a.ids[id] || name != "" && a.names[name]
}

// AllowsAny reports whether any of ids (a chat and its parent) is on the
// list of ids; an empty list allows all.
func (a Access) AllowsAny(ids ...string) bool {
	if a.Open() {
		return true
	}
	for _, id := range ids {
		if k := strings.ToLower(strings.TrimSpace(id)); k != "" && a.ids[k] {
			return true
		}
	}
	return false
}

// Names are the entries taken as names, sorted (for a warning at start:
// ids are safer).
func (a Access) Names() []string {
	var out []string
	for n := range a.names {
		out = append(out, "@"+n)
	}
	sort.Strings(out)
	return out
}

// WarnNames logs once that allow_users (key) lists names.
func WarnNames(log *slog.Logger, key string, a Access) {
	if n := a.Names(); len(n) > 0 {
		log.Warn(key+" lists usernames: a username can be changed and then taken by someone else; list user ids instead", "names", strings.Join(n, ", "))
	}
}

// Digits reports whether s is a decimal number, the shape of Telegram's
// and Discord's ids (a Telegram chat's may be negative).
func Digits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
