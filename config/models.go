package config

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
)

// ResolveModel turns a model reference (a catalog key, a catalog alias, or
// "<provider>/<model>" with a configured provider) into its canonical
// "<provider>/<model>" form. ok is false when the reference names nothing
// configured.
func (c *Config) ResolveModel(ref string) (canonical string, ok bool) {
	if ref == "" {
		return "", false
	}
	if _, ok := c.Models.Catalog[ref]; ok {
		return ref, true
	}
	for key, e := range c.Models.Catalog {
		if e.Alias != "" && e.Alias == ref {
			return key, true
		}
	}
	if prov, model, found := strings.Cut(ref, "/"); found && model != "" {
		if _, ok := c.Models.Providers[prov]; ok {
			return ref, true
		}
	}
	return "", false
}

// knownModels lists every reference that resolves: catalog keys, aliases
// and each provider's listed models, sorted; used for suggestions.
func (c *Config) knownModels() []string {
	var out []string
	for key, e := range c.Models.Catalog {
		out = append(out, key)
		if e.Alias != "" {
			out = append(out, e.Alias)
		}
	}
	for id, p := range c.Models.Providers {
		for _, m := range p.Models {
			out = append(out, id+"/"+m.ID)
		}
	}
	sort.Strings(out)
	return out
}

// providerIDs returns the configured provider ids, sorted.
func (c *Config) providerIDs() []string {
	ids := make([]string, 0, len(c.Models.Providers))
	for id := range c.Models.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ModelRef is one model reference the config makes, with its key path.
type ModelRef struct {
	Path string // e.g. "routing.fallbacks[1]"
	Ref  string
}

// ModelRefs lists every non-empty model reference the config makes
// outside models.*: routing, the enabled channels and the Lua default.
// Validation checks each; the router makes each usable.
func (c *Config) ModelRefs() []ModelRef {
	var out []ModelRef
	add := func(path, ref string) {
		if ref != "" {
			out = append(out, ModelRef{Path: path, Ref: ref})
		}
	}
	r := c.Routing
	add("routing.primary", r.Primary)
	for i, ref := range r.Fallbacks {
		add(fmt.Sprintf("routing.fallbacks[%d]", i), ref)
	}
	for _, task := range sortedKeys(r.Pin) {
		add("routing.pin."+task, r.Pin[task])
	}
	for i, ref := range r.Allowed {
		add(fmt.Sprintf("routing.allowed[%d]", i), ref)
	}
	add("routing.judge.model", r.Judge.Model)
	for _, sec := range c.Channels.Sections() {
		if !sec.Enabled {
			continue
		}
		add("channels."+sec.Name+".model", sec.Model)
		for _, chat := range sortedKeys(sec.Models) {
			add("channels."+sec.Name+".models."+chat, sec.Models[chat])
		}
	}
	add("plugins.lua.default_model", c.Plugins.Lua.DefaultModel)
	for i, s := range c.Schedules {
		add(fmt.Sprintf("schedules[%d].model", i), s.Model)
	}
	add("state.compaction.model", c.State.Compaction.Model)
	return out
}

// IsLocal says whether the provider counts as local
// (llm.max_concurrent_local): as models.providers.<id>.local says, or,
// when it says nothing, whether its base URL is on this machine or a
// private network.
func (p Provider) IsLocal() bool {
	if p.Local != nil {
		return *p.Local
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}
