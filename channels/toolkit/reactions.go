package toolkit

import (
	"sort"
	"strings"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// Reactions maps reaction emoji to the polarity of the quality signal
// they carry. Emoji are folded before lookup (see NormEmoji), so "❤" and
// "❤️", "👍🏽" and "👍", ":+1:" and "+1::skin-tone-3" are the same.
type Reactions struct {
	polarity map[string]core.Polarity
}

// NewReactions builds the map from the common block's reactions.
func NewReactions(r config.Reactions) Reactions {
	m := map[string]core.Polarity{}
	for _, e := range r.Positive {
		m[NormEmoji(e)] = core.Positive
	}
	for _, e := range r.Negative {
		m[NormEmoji(e)] = core.Negative
	}
	return Reactions{polarity: m}
}

// Polarity returns the emoji's polarity; ok is false for an emoji that
// is not a signal.
func (r Reactions) Polarity(emoji string) (p core.Polarity, ok bool) {
	p, ok = r.polarity[NormEmoji(emoji)]
	return p, ok
}

// NormEmoji folds the spellings of one reaction: surrounding spaces and
// colons, variation selectors (U+FE0E, U+FE0F), skin-tone modifiers
// (U+1F3FB–U+1F3FF, and Slack's "::skin-tone-N" suffix), and letter case
// of named reactions.
func NormEmoji(e string) string {
	e = strings.TrimSpace(e)
	if i := strings.Index(e, "::skin-tone-"); i >= 0 {
		e = e[:i]
	}
	e = strings.Trim(e, ":")
	var b strings.Builder
	for _, r := range e {
		switch {
		case r == '\ufe0e', r == '\ufe0f':
		case r >= 0x1f3fb && r <= 0x1f3ff:
		default:
			b.WriteRune(r)
		}
	}
	return strings.ToLower(b.String())
}

// Diff compares the reactions one user had on a message before and after
// an update and returns the signal emoji added and removed (folded,
// sorted, each once). Emoji that carry no polarity are left out.
func (r Reactions) Diff(old, cur []string) (added, removed []string) {
	o, c := r.signalSet(old), r.signalSet(cur)
	for e := range c {
		if !o[e] {
			added = append(added, e)
		}
	}
	for e := range o {
		if !c[e] {
			removed = append(removed, e)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func (r Reactions) signalSet(es []string) map[string]bool {
	m := map[string]bool{}
	for _, e := range es {
		if n := NormEmoji(e); n != "" {
			if _, ok := r.polarity[n]; ok {
				m[n] = true
			}
		}
	}
	return m
}

// Event builds the core.Reaction for one emoji added to or removed from a
// message; base carries the conversation, message, user and time, and
// its EventID the platform's identity of the update (made unique per
// emoji and direction here). ok is false when the emoji is no signal.
func (r Reactions) Event(base core.Reaction, emoji string, added bool) (core.Reaction, bool) {
	p, ok := r.Polarity(emoji)
	if !ok {
		return core.Reaction{}, false
	}
	dir := "-"
	if added {
		dir = "+"
	}
	base.Emoji = NormEmoji(emoji)
	base.Added = added
	base.Polarity = p
	base.EventID = base.EventID + ":" + dir + base.Emoji
	return base, true
}

// Events turns an old → new reaction update into its events, removals
// first.
func (r Reactions) Events(base core.Reaction, old, cur []string) []core.Reaction {
	added, removed := r.Diff(old, cur)
	out := make([]core.Reaction, 0, len(added)+len(removed))
	for _, e := range removed {
		if ev, ok := r.Event(base, e, false); ok {
			out = append(out, ev)
		}
	}
	for _, e := range added {
		if ev, ok := r.Event(base, e, true); ok {
			out = append(out, ev)
		}
	}
	return out
}
