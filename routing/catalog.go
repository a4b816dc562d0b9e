package routing

import (
	"fmt"
	"sort"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Model is one catalog entry: a provider/model reference with what the
// router needs to choose it.
type Model struct {
	// Ref is "provider/model".
	Ref string
	// Alias is the short name users may type ("haiku").
	Alias string
	// Weight 0..100: higher is preferred and tried first.
	Weight int
	// CostIn and CostOut are USD per million input and output tokens.
	CostIn, CostOut float64
	// ContextWindow in tokens (0 = unknown).
	ContextWindow int
	// MaxOutputTokens caps each answer (models.catalog.<ref>.max_output_tokens;
	// 0 = DefaultMaxOutputTokens, at most half a known context window).
	MaxOutputTokens int
	// Local marks a model served on this machine (the local semaphore).
	Local bool
	// Capabilities are what the model takes besides text
	// (models.catalog.<ref>.capabilities: CapVision, CapAudio, CapTools).
	// A model that declares none is taken to call tools and nothing else.
	Capabilities []string
}

// Capabilities a catalog entry may declare.
const (
	// CapVision: the model takes images.
	CapVision = "vision"
	// CapAudio: the model takes audio.
	CapAudio = "audio"
	// CapTools: the model calls tools.
	CapTools = "tools"
)

// Can says whether the model has capability c.
func (m Model) Can(c string) bool {
	if len(m.Capabilities) == 0 {
		return c == CapTools
	}
	for _, x := range m.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// canAll says whether the model has every capability of cs.
func (m Model) canAll(cs []string) bool {
	for _, c := range cs {
		if !m.Can(c) {
			return false
		}
	}
	return true
}

// Provider returns the provider id of the reference.
func (m Model) Provider() string { p, _, _ := strings.Cut(m.Ref, "/"); return p }

// ModelID returns the provider's own model id.
func (m Model) ModelID() string { _, id, _ := strings.Cut(m.Ref, "/"); return id }

// Price is the blended USD per million tokens used to compare models
// (output tokens weigh three times input, a typical chat ratio).
func (m Model) Price() float64 { return (m.CostIn + 3*m.CostOut) / 4 }

// Cost is the USD cost of a call with the given tokens.
func (m Model) Cost(in, out int) float64 {
	return (float64(in)*m.CostIn + float64(out)*m.CostOut) / 1e6
}

// catalog is the immutable, weight-ordered model list.
type catalog struct {
	byWeight []Model // highest weight first, ties by ref
	byRef    map[string]int
	byAlias  map[string]int
	maxPrice float64
}

func newCatalog(models []Model) (*catalog, error) {
	c := &catalog{byRef: map[string]int{}, byAlias: map[string]int{}}
	c.byWeight = append([]Model(nil), models...)
	sort.SliceStable(c.byWeight, func(i, j int) bool {
		if c.byWeight[i].Weight != c.byWeight[j].Weight {
			return c.byWeight[i].Weight > c.byWeight[j].Weight
		}
		return c.byWeight[i].Ref < c.byWeight[j].Ref
	})
	for i, m := range c.byWeight {
		if p, id, ok := strings.Cut(m.Ref, "/"); !ok || p == "" || id == "" {
			return nil, fmt.Errorf("models.catalog: %q is not a provider/model reference; write it as <provider id>/<model id>", m.Ref)
		}
		if m.Weight < 0 || m.Weight > 100 {
			return nil, fmt.Errorf("models.catalog.%s.weight: %d is outside 0..100", m.Ref, m.Weight)
		}
		if _, dup := c.byRef[m.Ref]; dup {
			return nil, fmt.Errorf("models.catalog: %s is listed twice", m.Ref)
		}
		c.byRef[m.Ref] = i
		if m.Alias != "" {
			a := strings.ToLower(m.Alias)
			if j, dup := c.byAlias[a]; dup {
				return nil, fmt.Errorf("models.catalog.%s.alias: %q is already the alias of %s", m.Ref, m.Alias, c.byWeight[j].Ref)
			}
			c.byAlias[a] = i
		}
		c.maxPrice = max(c.maxPrice, m.Price())
	}
	return c, nil
}

// resolve turns a ref or alias into the catalog entry.
func (c *catalog) resolve(name string) (Model, bool) {
	name = strings.TrimSpace(name)
	if i, ok := c.byRef[name]; ok {
		return c.byWeight[i], true
	}
	if i, ok := c.byAlias[strings.ToLower(name)]; ok {
		return c.byWeight[i], true
	}
	// Case-insensitive ref match.
	for _, m := range c.byWeight {
		if strings.EqualFold(m.Ref, name) {
			return m, true
		}
	}
	return Model{}, false
}

// relPrice is the model's price relative to the most expensive one (0..1).
func (c *catalog) relPrice(m Model) float64 {
	if c.maxPrice <= 0 {
		return 0
	}
	return m.Price() / c.maxPrice
}

// CheapestModel is the catalog model with the lowest blended price among
// those the router may choose on its own (weight above 0; every model
// when none has a weight), the higher weight on a tie; "" for an empty
// catalog. It is the default state.compaction.model: background work
// nobody judges goes to the cheapest model.
func (r *Router) CheapestModel() string { return r.cat.cheapest() }

func (c *catalog) cheapest() string {
	best, price, weighted := "", 0.0, false
	for _, m := range c.byWeight {
		weighted = weighted || m.Weight > 0
	}
	for _, m := range c.byWeight { // highest weight first: ties keep it
		if weighted && m.Weight == 0 {
			continue
		}
		if best == "" || m.Price() < price {
			best, price = m.Ref, m.Price()
		}
	}
	return best
}

// closeMatches returns up to three refs or aliases near name.
func (c *catalog) closeMatches(name string) []string {
	name = strings.ToLower(strings.TrimSpace(name))
	type cand struct {
		s string
		d int
	}
	var cs []cand
	for _, m := range c.byWeight {
		for _, s := range []string{m.Ref, m.Alias, m.ModelID()} {
			if s == "" {
				continue
			}
			ls := strings.ToLower(s)
			d := core.EditDistance(name, ls)
			if strings.Contains(ls, name) || strings.Contains(name, ls) {
				d = min(d, 1)
			}
			if d <= max(2, len(name)/3) {
				show := m.Ref
				if m.Alias != "" {
					show = m.Alias + " (" + m.Ref + ")"
				}
				cs = append(cs, cand{show, d})
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	seen := map[string]bool{}
	for _, x := range cs {
		if !seen[x.s] && len(out) < 3 {
			seen[x.s] = true
			out = append(out, x.s)
		}
	}
	return out
}

// DefaultMaxOutputTokens caps an answer when the catalog gives no
// max_output_tokens: every request carries a cap, so one long answer
// cannot hold a call (and a credential) for the whole provider timeout.
const DefaultMaxOutputTokens = 4096

// maxTokens is the answer cap of a call to m: the caller's, within the
// catalog's max_output_tokens; without a catalog value the caller's, or
// the default (at most half a known context window, so the prompt keeps
// room on a small local model).
func (m Model) maxTokens(asked int) int {
	if m.MaxOutputTokens > 0 {
		if asked > 0 {
			return min(asked, m.MaxOutputTokens)
		}
		return m.MaxOutputTokens
	}
	if asked > 0 {
		return asked
	}
	if m.ContextWindow > 0 {
		return min(DefaultMaxOutputTokens, max(m.ContextWindow/2, 1))
	}
	return DefaultMaxOutputTokens
}
