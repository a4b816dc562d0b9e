package plugins

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
)

// Executor runs calls in one plugin (the guard's contract).
type Executor = guard.Executor

// Limits bound the calls of one plugin.
type Limits struct {
	Timeout          time.Duration
	MaxResponseBytes int
}

// Registry holds the registered plugins: capabilities and executors. It
// is safe for concurrent use and implements guard.Resolver.
type Registry struct {
	limits func(plugin string) Limits
	san    guard.Sanitizer

	mu        sync.RWMutex
	plugins   map[string]Capability
	executors map[string]Executor
}

// NewRegistry returns an empty registry; limits gives each plugin's
// timeout and response cap (plugins.tools.defaults and overrides); nil
// means the guard's defaults.
func NewRegistry(limits func(plugin string) Limits) *Registry {
	if limits == nil {
		limits = func(string) Limits { return Limits{} }
	}
	return &Registry{limits: limits, plugins: map[string]Capability{}, executors: map[string]Executor{}}
}

// Register adds a plugin. It fails when the capability is invalid or the
// name is taken.
func (r *Registry) Register(c Capability, exec Executor) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if exec == nil {
		return fmt.Errorf("register plugin %s: nil executor", c.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.plugins[c.Name]; ok {
		return fmt.Errorf("plugin name %s is already registered by another plugin: rename one of them", c.Name)
	}
	r.plugins[c.Name] = r.bounded(c)
	r.executors[c.Name] = exec
	return nil
}

// bounded returns a copy of c whose plugin-controlled text is safe to
// offer the LLM: every description one sanitized line of at most
// guard.MaxDescriptionRunes, the post_process prompt cleaned and cut to
// guard.MaxPromptBytes.
func (r *Registry) bounded(c Capability) Capability {
	c.Description = r.san.OneLine(c.Description, guard.MaxDescriptionRunes)
	c.Actions = slices.Clone(c.Actions)
	for i := range c.Actions {
		a := &c.Actions[i]
		a.Description = r.san.OneLine(a.Description, guard.MaxDescriptionRunes)
		a.PostProcessPrompt = guard.Prompt(a.PostProcessPrompt)
		a.Parameters = slices.Clone(a.Parameters)
		for j := range a.Parameters {
			a.Parameters[j].Description = r.san.OneLine(a.Parameters[j].Description, guard.MaxDescriptionRunes)
		}
	}
	return c
}

// Deregister removes a plugin; unknown names are ignored.
func (r *Registry) Deregister(name string) {
	r.mu.Lock()
	delete(r.plugins, name)
	delete(r.executors, name)
	r.mu.Unlock()
}

// GetCapability returns a plugin's declared capability.
func (r *Registry) GetCapability(name string) (Capability, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.plugins[name]
	return c, ok
}

// GetExecutor returns the executor that calls a plugin.
func (r *Registry) GetExecutor(name string) (Executor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.executors[name]
	return e, ok
}

// ListCapabilities returns every registered plugin, sorted by name.
func (r *Registry) ListCapabilities() []Capability {
	r.mu.RLock()
	out := make([]Capability, 0, len(r.plugins))
	for _, c := range r.plugins {
		out = append(out, c)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Capability) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// HasAction reports whether plugin is registered with action.
func (r *Registry) HasAction(plugin, action string) bool {
	c, ok := r.GetCapability(plugin)
	if !ok {
		return false
	}
	_, ok = c.Action(action)
	return ok
}

// Action returns the declaration of one action (for post_process).
func (r *Registry) Action(plugin, action string) (Action, bool) {
	c, ok := r.GetCapability(plugin)
	if !ok {
		return Action{}, false
	}
	return c.Action(action)
}

// Tools returns every action of every plugin as a tool for the LLM.
func (r *Registry) Tools() []core.ToolSpec {
	var out []core.ToolSpec
	for _, c := range r.ListCapabilities() {
		for _, a := range c.Actions {
			out = append(out, c.ToolSpec(a))
		}
	}
	return out
}

// Resolve implements guard.Resolver.
func (r *Registry) Resolve(plugin, action string) (guard.Target, bool) {
	r.mu.RLock()
	c, ok := r.plugins[plugin]
	exec := r.executors[plugin]
	r.mu.RUnlock()
	if !ok {
		return guard.Target{}, false
	}
	a, ok := c.Action(action)
	if !ok {
		return guard.Target{}, false
	}
	l := r.limits(plugin)
	return guard.Target{Exec: exec, Spec: c.ToolSpec(a), Timeout: l.Timeout, MaxResponseBytes: l.MaxResponseBytes}, true
}

var _ guard.Resolver = (*Registry)(nil)
