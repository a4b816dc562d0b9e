package routing

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Profile is one credential of a provider.
type Profile struct {
	ID       string
	Provider string
	OAuth    bool
	Key      core.Secret
}

// Cooldowns configure how long a failing profile rests (auth.cooldowns).
type Cooldowns struct {
	Initial    time.Duration // default 1m
	Multiplier float64       // default 5
	Max        time.Duration // default 1h
	BillingMax time.Duration // default 24h
}

func (c Cooldowns) withDefaults() Cooldowns {
	if c.Initial <= 0 {
		c.Initial = time.Minute
	}
	if c.Multiplier < 1 {
		c.Multiplier = 5
	}
	if c.Max <= 0 {
		c.Max = time.Hour
	}
	if c.BillingMax <= 0 {
		c.BillingMax = 24 * time.Hour
	}
	return c
}

// billingInitial starts the billing lane: quota and credit problems are
// rarely fixed within minutes.
const billingInitial = 5 * time.Hour

// step returns the cooldown after the n-th consecutive failure (n ≥ 1):
// Initial × Multiplier^(n−1), capped at Max.
func (c Cooldowns) step(n int) time.Duration { return c.ladder(c.Initial, n) }

// ladder is the cooldown after the n-th consecutive failure when the
// first one rests base: base × Multiplier^(n−1), capped at Max (a base
// above Max, a server's own Retry-After, is kept as it is).
func (c Cooldowns) ladder(base time.Duration, n int) time.Duration {
	top := max(c.Max, base)
	d := float64(base)
	for i := 1; i < n && d < float64(top); i++ {
		d *= c.Multiplier
	}
	return min(time.Duration(d), top)
}

// billingStep is the billing lane: 5h doubling, capped at BillingMax.
func (c Cooldowns) billingStep(n int) time.Duration {
	d := min(billingInitial, c.BillingMax)
	for i := 1; i < n && d < c.BillingMax; i++ {
		d *= 2
	}
	return min(d, c.BillingMax)
}

type profileFileEntry struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Key   string `json:"key"`
	Token string `json:"token"`
}

// LoadProfilesFile reads an auth profiles file (seed 004's format: a JSON
// object of provider id → list of {id, type, key}). The file must not be
// readable by group or others. A missing file returns an error wrapping
// os.ErrNotExist so the caller can treat the default path as optional.
func LoadProfilesFile(path string) (map[string][]Profile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("auth.profiles_file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("auth.profiles_file %s has mode %04o and is readable by group or others; it holds API keys, so run: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth.profiles_file: %w", err)
	}
	var raw map[string][]profileFileEntry
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("auth.profiles_file %s: not valid JSON (expected {\"<provider>\": [{\"id\", \"type\", \"key\"}]}): %w", path, err)
	}
	out := map[string][]Profile{}
	// Cooldowns and usage are kept by profile id, so ids are unique
	// across providers.
	owner := map[string]string{}
	for prov, list := range raw {
		for i, e := range list {
			if e.ID == "" {
				return nil, fmt.Errorf("auth.profiles_file %s: %s[%d] has no \"id\"; give each profile an id like %q", path, prov, i, prov+":default")
			}
			if o, dup := owner[e.ID]; dup {
				return nil, fmt.Errorf("auth.profiles_file %s: profile id %q is used twice (under %q and %q); ids must be unique, e.g. %q", path, e.ID, o, prov, prov+":"+e.ID)
			}
			owner[e.ID] = prov
			key := e.Key
			if key == "" {
				key = e.Token
			}
			if key == "" {
				return nil, fmt.Errorf("auth.profiles_file %s: profile %s has no \"key\"", path, e.ID)
			}
			switch e.Type {
			case "", "api_key", "oauth", "token", "setup_token":
			default:
				return nil, fmt.Errorf("auth.profiles_file %s: profile %s has type %q; use api_key, oauth or token", path, e.ID, e.Type)
			}
			out[prov] = append(out[prov], Profile{ID: e.ID, Provider: prov, OAuth: e.Type == "oauth" || e.Type == "token" || e.Type == "setup_token", Key: core.Secret(key)})
		}
	}
	return out, nil
}

// orderProfiles returns a provider's profiles in selection order: the
// session's pinned profile (/model @id), then auth.order, then OAuth
// before API keys, then the profile the session keeps (kept: the one of
// its last answer, so a conversation stays on one credential among
// equals), then round-robin (oldest last use first); profiles cooling
// down at now always come last, soonest available first.
func orderProfiles(ps []Profile, st map[string]core.ProfileState, pinned, kept string, order []string, now time.Time) []Profile {
	rank := map[string]int{}
	for i, id := range order {
		rank[id] = i + 1
	}
	out := append([]Profile(nil), ps...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		sa, sb := st[a.ID], st[b.ID]
		ca, cb := sa.CooldownUntil.After(now), sb.CooldownUntil.After(now)
		if ca != cb {
			return !ca
		}
		if ca {
			return sa.CooldownUntil.Before(sb.CooldownUntil)
		}
		if (a.ID == pinned) != (b.ID == pinned) {
			return a.ID == pinned
		}
		ra, rb := rank[a.ID], rank[b.ID]
		if (ra > 0) != (rb > 0) {
			return ra > 0
		}
		if ra != rb {
			return ra < rb
		}
		if a.OAuth != b.OAuth {
			return a.OAuth
		}
		if (a.ID == kept) != (b.ID == kept) {
			return a.ID == kept
		}
		if !sa.LastUsed.Equal(sb.LastUsed) {
			return sa.LastUsed.Before(sb.LastUsed)
		}
		return a.ID < b.ID
	})
	return out
}
