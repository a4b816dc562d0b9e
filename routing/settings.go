package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/opentalon/opentalon/core"
)

// The values admins set in chat with /budget and /allowed: each overrides
// the config key it is named after until it is dropped (/budget default,
// /allowed default). They are kept in the store, so they outlive a
// restart, and read again with the auth profiles' shared state
// (Options.SharedProfiles), so a change made on one replica holds on
// every replica within that time; a change made here holds here at once.

// Keys of the settings: the config keys they override.
const (
	KeyDailyUSD     = "routing.budget.daily_usd"
	KeyChatDailyUSD = "routing.budget.chat_daily_usd"
	KeyAllowed      = "routing.allowed"
)

// SettingsStore is the optional Store capability of keeping the values
// admins set in chat; store.DB and MemStore have it. Without it /budget
// and /allowed only show the config's values.
type SettingsStore interface {
	// Settings returns every setting.
	Settings(ctx context.Context) ([]core.Setting, error)
	// SetSetting stores s, replacing the value of its key.
	SetSetting(ctx context.Context, s core.Setting) error
	// DeleteSetting drops the setting of key; it reports whether there
	// was one.
	DeleteSetting(ctx context.Context, key string) (bool, error)
}

// overrides are the settings the router knows, by key, as stored.
type overrides map[string]core.Setting

// budget is the value of a budget setting: 0 = no budget. ok is false
// when the key is not set (or its value is unreadable: the config's
// value holds then).
func (o overrides) budget(key string) (usd float64, s core.Setting, ok bool) {
	s, ok = o[key]
	if !ok {
		return 0, s, false
	}
	v, err := strconv.ParseFloat(s.Value, 64)
	if err != nil || v < 0 || v != v {
		return 0, s, false
	}
	return v, s, true
}

// allowed is the value of the allowlist setting (empty = any model).
func (o overrides) allowed() (refs []string, s core.Setting, ok bool) {
	s, ok = o[KeyAllowed]
	if !ok {
		return nil, s, false
	}
	if err := json.Unmarshal([]byte(s.Value), &refs); err != nil {
		return nil, s, false
	}
	return refs, s, true
}

// limits are the budgets and the allowlist in force: the settings', or
// the config's where a key is not set. fromChat says a value is a
// setting's.
type limits struct {
	daily, chatDaily             float64
	dailyFromChat, chatFromChat  bool
	allowed                      []string
	allowedFromChat              bool
	dailySet, chatSet, allowedBy core.Setting
}

// limits returns the budgets and allowlist in force. It runs on every
// decision: the settings are parsed once per change (r.lim), not per
// message.
func (r *Router) limits() limits {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lim == nil {
		l := r.o.limitsWith(r.over)
		r.lim = &l
	}
	return *r.lim
}

// limitsWith is the budgets and allowlist of the config overridden by o.
func (opts Options) limitsWith(o overrides) limits {
	l := limits{daily: opts.DailyUSD, chatDaily: opts.ChatDailyUSD, allowed: opts.Allowed}
	if v, s, ok := o.budget(KeyDailyUSD); ok {
		l.daily, l.dailyFromChat, l.dailySet = v, true, s
	}
	if v, s, ok := o.budget(KeyChatDailyUSD); ok {
		l.chatDaily, l.chatFromChat, l.chatSet = v, true, s
	}
	if refs, s, ok := o.allowed(); ok {
		l.allowed, l.allowedFromChat, l.allowedBy = refs, true, s
	}
	return l
}

// budgeted says a daily budget is in force.
func (l limits) budgeted() bool { return l.daily > 0 || l.chatDaily > 0 }

// allows says ref may be pinned with /model.
func (r *Router) allows(allowed []string, ref string) bool {
	return len(allowed) == 0 || slices.ContainsFunc(allowed, func(a string) bool { x, _ := r.cat.resolve(a); return x.Ref == ref })
}

// loadSettings reads the settings from the store (when it keeps them).
// A change made here while it read is not undone by what it read.
func (r *Router) loadSettings(ctx context.Context) {
	st, ok := r.o.Store.(SettingsStore)
	if !ok {
		return
	}
	r.mu.Lock()
	gen := r.overGen
	r.mu.Unlock()
	ss, err := st.Settings(ctx)
	if err != nil {
		r.log.Warn("read the settings made in chat", "err", err)
		return
	}
	o := make(overrides, len(ss))
	for _, s := range ss {
		o[s.Key] = s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen == r.overGen {
		r.over, r.lim = o, nil
	}
}

// setSetting stores the value of key set in chat by who ("" drops it: the
// config's value holds again) and makes it hold here at once. It reports
// whether there was a setting to drop.
func (r *Router) setSetting(ctx context.Context, key, value, who, conv string) (bool, error) {
	st, ok := r.o.Store.(SettingsStore)
	if !ok {
		return false, fmt.Errorf("this store cannot keep settings")
	}
	s := core.Setting{Key: key, Value: value, UpdatedAt: r.now(), UpdatedBy: who}
	had := true
	var err error
	if value == "" {
		had, err = st.DeleteSetting(ctx, key)
	} else {
		err = st.SetSetting(ctx, s)
	}
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	o := maps.Clone(r.over)
	if o == nil {
		o = overrides{}
	}
	if value == "" {
		delete(o, key)
	} else {
		o[key] = s
	}
	r.over, r.lim = o, nil
	r.overGen++
	r.mu.Unlock()
	if value == "" && had {
		r.log.Info("setting made in chat dropped: the config's value holds again", "key", key, "by", who, "conversation", conv)
	} else if value != "" {
		r.log.Info("setting changed in chat", "key", key, "value", value, "by", who, "conversation", conv)
	}
	return had, nil
}

// setBy describes who set s and when, for the commands' answers.
func setBy(s core.Setting) string {
	out := "set in chat"
	if s.UpdatedBy != "" {
		out += " by " + s.UpdatedBy
	}
	if !s.UpdatedAt.IsZero() {
		out += " on " + s.UpdatedAt.UTC().Format("2006-01-02 15:04") + " UTC"
	}
	return out
}

// formatBudgetValue is how a budget is stored: its dollars, "0" for none.
func formatBudgetValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// mustJSON encodes refs as the allowlist setting's value.
func mustJSON(refs []string) string {
	if refs == nil {
		refs = []string{}
	}
	b, err := json.Marshal(refs)
	if err != nil {
		panic(fmt.Sprintf("encode %v: %v", refs, err))
	}
	return string(b)
}
