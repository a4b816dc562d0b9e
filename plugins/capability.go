package plugins

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// Capability is what a plugin declared at registration.
type Capability struct {
	Name        string
	Description string
	Actions     []Action
}

// Action is one thing a plugin can do.
type Action struct {
	Name        string
	Description string
	Parameters  []Parameter
	// PostProcess asks for one LLM call over the output with
	// PostProcessPrompt as the system prompt.
	PostProcess       bool
	PostProcessPrompt string
}

// Parameter is one argument of an action.
type Parameter struct {
	Name        string
	Description string
	Type        string
	Required    bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxWireName is the longest tool name providers accept; the wire name of
// an action is "plugin__action".
const maxWireName = 64

// ValidName reports whether s is a valid plugin or action name: letters,
// digits, dash and underscore, no "__" (it separates plugin and action in
// the tool names the LLM sees).
func ValidName(s string) bool {
	return nameRE.MatchString(s) && !strings.Contains(s, "__")
}

// Bounds of a capability declaration.
const (
	MaxActions = 128
	MaxParams  = 32
)

// Validate checks names, parameter types, counts and duplicate actions.
func (c Capability) Validate() error {
	if !ValidName(c.Name) {
		return fmt.Errorf("plugin name %q is invalid: use 1-64 letters, digits, '-' or '_' (no \"__\")", c.Name)
	}
	if len(c.Actions) > MaxActions {
		return fmt.Errorf("plugin %s declares %d actions; at most %d are accepted", c.Name, len(c.Actions), MaxActions)
	}
	seen := map[string]bool{}
	for _, a := range c.Actions {
		if !ValidName(a.Name) {
			return fmt.Errorf("plugin %s: action name %q is invalid: use letters, digits, '-' or '_' (no \"__\")", c.Name, a.Name)
		}
		if n := len(c.Name) + 2 + len(a.Name); n > maxWireName {
			return fmt.Errorf("plugin %s: action %s makes the tool name %s__%s %d characters long; providers accept at most %d: shorten the plugin or action name", c.Name, a.Name, c.Name, a.Name, n, maxWireName)
		}
		if seen[a.Name] {
			return fmt.Errorf("plugin %s declares action %s twice", c.Name, a.Name)
		}
		seen[a.Name] = true
		if len(a.Parameters) > MaxParams {
			return fmt.Errorf("plugin %s action %s declares %d parameters; at most %d are accepted", c.Name, a.Name, len(a.Parameters), MaxParams)
		}
		for _, p := range a.Parameters {
			if p.Name == "" {
				return fmt.Errorf("plugin %s action %s: a parameter has no name", c.Name, a.Name)
			}
			switch p.Type {
			case "", "string", "number", "integer", "boolean":
			default:
				return fmt.Errorf("plugin %s action %s parameter %s: type %q is not one of string, number, integer, boolean", c.Name, a.Name, p.Name, p.Type)
			}
		}
	}
	return nil
}

// Action returns the named action.
func (c Capability) Action(name string) (Action, bool) {
	for _, a := range c.Actions {
		if a.Name == name {
			return a, true
		}
	}
	return Action{}, false
}

// ToolSpec turns one action into the tool the LLM is offered.
func (c Capability) ToolSpec(a Action) core.ToolSpec {
	spec := core.ToolSpec{Plugin: c.Name, Action: a.Name, Description: a.Description}
	if spec.Description == "" {
		spec.Description = c.Description
	}
	for _, p := range a.Parameters {
		spec.Params = append(spec.Params, core.ToolParam{Name: p.Name, Description: p.Description, Type: p.Type, Required: p.Required})
	}
	return spec
}

// capabilityFromProto converts the wire form.
func capabilityFromProto(pc *pluginpb.PluginCapabilities) Capability {
	c := Capability{Name: pc.GetName(), Description: pc.GetDescription()}
	for _, a := range pc.GetActions() {
		act := Action{Name: a.GetName(), Description: a.GetDescription(), PostProcess: a.GetPostProcess(), PostProcessPrompt: a.GetPostProcessPrompt()}
		for _, p := range a.GetParameters() {
			act.Parameters = append(act.Parameters, Parameter{Name: p.GetName(), Description: p.GetDescription(), Type: p.GetType(), Required: p.GetRequired()})
		}
		c.Actions = append(c.Actions, act)
	}
	return c
}
