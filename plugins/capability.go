package plugins

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// Capability is what a plugin declared at registration: its tools and
// the other extension points it offers.
type Capability struct {
	Name        string
	Description string
	Actions     []Action
	// Hooks, Routes and Schedules are the plugin's request/response
	// hooks, HTTP routes and schedules; Services names the other services
	// it serves (ServiceNotify, ServiceAuthorize, ServiceBlobs,
	// ServiceProvider).
	Hooks     []Hook
	Routes    []Route
	Schedules []ScheduleDecl
	Services  []string
}

// Hook is one declared request (StagePre) or response (StagePost) hook.
type Hook struct {
	Stage string
	// Order places it among every hook, Lua scripts included.
	Order int
	// Timeout shortens plugins.tools.hooks.timeout for it (0 = that).
	Timeout time.Duration
	// StreamUnsafe: the post hook must see the whole answer before the
	// user does, so answers are not streamed while it is loaded.
	StreamUnsafe bool
}

// Hook stages.
const (
	StagePre  = "pre"
	StagePost = "post"
)

// Route is one declared HTTP route under /api/plugins/<name>/.
type Route struct {
	// Method is an HTTP method ("" = any).
	Method string
	// Path is below /api/plugins/<name>/; ending in "/" it also matches
	// everything below it.
	Path string
	// Public serves it without server.api_key (the plugin verifies).
	Public bool
}

// ScheduleDecl is one schedule a plugin declared; the plugin is called
// back (OnSchedule) when it fires.
type ScheduleDecl struct {
	ID       string
	Interval string
	Cron     string
	Channel  string
	Chat     string
	Thread   string
	Timezone string
	Missed   string
}

// Schedule is the declaration as a schedule of its plugin (Key is its
// ID; the scheduler sets the source and checks that it can run). An
// interval that is not a Go duration ("1h", "90m") is an error.
func (d ScheduleDecl) Schedule() (core.Schedule, error) {
	sc := core.Schedule{Key: d.ID, Cron: d.Cron, Timezone: d.Timezone, Missed: d.Missed,
		Conversation: core.ConversationKey{Channel: d.Channel, Chat: d.Chat, Thread: d.Thread}}
	if d.Interval == "" {
		sc.Spec = "cron " + d.Cron
		return sc, nil
	}
	iv, err := time.ParseDuration(d.Interval)
	if err != nil {
		return core.Schedule{}, fmt.Errorf("interval %q is not a Go duration such as \"1h\" or \"90m\"", d.Interval)
	}
	sc.Interval, sc.Spec = iv, "every "+iv.String()
	return sc, nil
}

// Services a plugin may serve besides PluginService.
const (
	ServiceNotify    = "notify"
	ServiceAuthorize = "authorize"
	ServiceBlobs     = "blobs"
	ServiceProvider  = "provider"
)

var knownServices = []string{ServiceNotify, ServiceAuthorize, ServiceBlobs, ServiceProvider}

// Offers reports whether the plugin declared service.
func (c Capability) Offers(service string) bool { return slices.Contains(c.Services, service) }

// Bounds of the extension points one plugin declares.
const (
	MaxRoutes    = 32
	MaxSchedules = 32
	// ReservedRoutePlugin is the name whose routes the core serves
	// itself (POST /api/plugins/llm/generate).
	ReservedRoutePlugin = "llm"
)

var routePathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*/?$`) })

var httpMethods = []string{"", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

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

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// maxWireName is the longest tool name providers accept; the wire name of
// an action is "plugin__action".
const maxWireName = 64

// ValidName reports whether s is a valid plugin or action name: letters,
// digits, dash and underscore, no "__" (it separates plugin and action in
// the tool names the LLM sees).
func ValidName(s string) bool {
	return nameRE().MatchString(s) && !strings.Contains(s, "__")
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
			case "", "string", "number", "integer", "boolean", "array", "object":
			default:
				return fmt.Errorf("plugin %s action %s parameter %s: type %q is not a JSON schema type (string, number, integer, boolean, array, object)", c.Name, a.Name, p.Name, p.Type)
			}
		}
	}
	return c.validateExtensions()
}

// validateExtensions checks the hooks, routes, schedules and services.
func (c Capability) validateExtensions() error {
	stages := map[string]bool{}
	for _, h := range c.Hooks {
		if h.Stage != StagePre && h.Stage != StagePost {
			return fmt.Errorf("plugin %s: hook stage %q is not pre or post", c.Name, h.Stage)
		}
		if stages[h.Stage] {
			return fmt.Errorf("plugin %s declares two %s hooks; one per stage", c.Name, h.Stage)
		}
		stages[h.Stage] = true
		if h.Timeout < 0 {
			return fmt.Errorf("plugin %s: %s hook timeout must not be negative", c.Name, h.Stage)
		}
	}
	if len(c.Routes) > 0 && c.Name == ReservedRoutePlugin {
		return fmt.Errorf("plugin %s declares HTTP routes, but /api/plugins/%s/ belongs to the core: rename the plugin", c.Name, c.Name)
	}
	if len(c.Routes) > MaxRoutes {
		return fmt.Errorf("plugin %s declares %d routes; at most %d are accepted", c.Name, len(c.Routes), MaxRoutes)
	}
	for _, r := range c.Routes {
		if !routePathRE().MatchString(r.Path) || strings.Contains("/"+r.Path+"/", "/../") || strings.Contains("/"+r.Path+"/", "/./") {
			return fmt.Errorf("plugin %s: route path %q is invalid: use segments of letters, digits, '.', '_', '~', '-' separated by '/', without a leading '/'", c.Name, r.Path)
		}
		if !slices.Contains(httpMethods, r.Method) {
			return fmt.Errorf("plugin %s: route %s: method %q is not one of %s", c.Name, r.Path, r.Method, strings.Join(httpMethods[1:], ", "))
		}
	}
	if len(c.Schedules) > MaxSchedules {
		return fmt.Errorf("plugin %s declares %d schedules; at most %d are accepted", c.Name, len(c.Schedules), MaxSchedules)
	}
	ids := map[string]bool{}
	for _, s := range c.Schedules {
		if !ValidName(s.ID) {
			return fmt.Errorf("plugin %s: schedule id %q is invalid: use letters, digits, '-' or '_'", c.Name, s.ID)
		}
		if ids[s.ID] {
			return fmt.Errorf("plugin %s declares schedule %s twice", c.Name, s.ID)
		}
		ids[s.ID] = true
		if (s.Interval == "") == (s.Cron == "") {
			return fmt.Errorf("plugin %s: schedule %s needs an interval or a cron expression (one of them)", c.Name, s.ID)
		}
		if s.Channel == "" || s.Chat == "" {
			return fmt.Errorf("plugin %s: schedule %s needs the channel and chat its output goes to", c.Name, s.ID)
		}
	}
	for _, sv := range c.Services {
		if !slices.Contains(knownServices, sv) {
			return fmt.Errorf("plugin %s: service %q is not one of %s", c.Name, sv, strings.Join(knownServices, ", "))
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

// paramType is a declared parameter type as its JSON schema name: any
// case, and the names languages use for them ("int", "float", "bool",
// "str", "list", "dict"...). Other names stay as declared (Validate
// refuses them).
func paramType(t string) string {
	switch l := strings.ToLower(strings.TrimSpace(t)); l {
	case "int", "int32", "int64", "long", "integer":
		return "integer"
	case "float", "float32", "float64", "double", "decimal", "number":
		return "number"
	case "bool", "boolean":
		return "boolean"
	case "str", "text", "string":
		return "string"
	case "list", "slice", "array":
		return "array"
	case "dict", "map", "object":
		return "object"
	case "":
		return ""
	}
	return t
}

// capabilityFromProto converts the wire form.
func capabilityFromProto(pc *pluginpb.PluginCapabilities) Capability {
	c := Capability{Name: pc.GetName(), Description: pc.GetDescription()}
	for _, a := range pc.GetActions() {
		act := Action{Name: a.GetName(), Description: a.GetDescription(), PostProcess: a.GetPostProcess(), PostProcessPrompt: a.GetPostProcessPrompt()}
		for _, p := range a.GetParameters() {
			act.Parameters = append(act.Parameters, Parameter{Name: p.GetName(), Description: p.GetDescription(), Type: paramType(p.GetType()), Required: p.GetRequired()})
		}
		c.Actions = append(c.Actions, act)
	}
	for _, h := range pc.GetHooks() {
		c.Hooks = append(c.Hooks, Hook{Stage: h.GetStage(), Order: int(h.GetOrder()), Timeout: time.Duration(h.GetTimeoutMs()) * time.Millisecond, StreamUnsafe: h.GetStreamUnsafe()})
	}
	for _, r := range pc.GetRoutes() {
		c.Routes = append(c.Routes, Route{Method: strings.ToUpper(r.GetMethod()), Path: r.GetPath(), Public: r.GetPublic()})
	}
	for _, s := range pc.GetSchedules() {
		c.Schedules = append(c.Schedules, ScheduleDecl{ID: s.GetId(), Interval: s.GetInterval(), Cron: s.GetCron(), Channel: s.GetChannel(),
			Chat: s.GetChat(), Thread: s.GetThread(), Timezone: s.GetTimezone(), Missed: s.GetMissed()})
	}
	c.Services = append(c.Services, pc.GetServices()...)
	return c
}
