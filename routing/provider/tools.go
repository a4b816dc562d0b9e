package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/core"
)

// toolSep joins plugin and action into one tool name for the LLM.
const toolSep = "__"

// ToolName is the name a tool has on the wire: plugin + "__" + action (just
// the action when the plugin is empty).
func ToolName(plugin, action string) string {
	if plugin == "" {
		return action
	}
	return plugin + toolSep + action
}

// SplitToolName is the inverse of ToolName: it cuts at the first "__"; a
// name without one is an action with no plugin.
func SplitToolName(name string) (plugin, action string) {
	if p, a, ok := strings.Cut(name, toolSep); ok {
		return p, a
	}
	return "", name
}

// toolsCache keeps the wire encoding of the last tool list a provider
// sent. The orchestrator offers the same tools call after call, and
// building and encoding their schemas (maps, their keys sorted) was most
// of the work of encoding a request; a list equal to the last one reuses
// its bytes, which are the same.
type toolsCache struct {
	mu    sync.Mutex
	specs []core.ToolSpec
	raw   json.RawMessage
}

// encoded returns the encoding of wire(tools), from the cache when tools
// equal the last list encoded. wire must depend on tools alone.
func (c *toolsCache) encoded(tools []core.ToolSpec, wire func([]core.ToolSpec) any) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw != nil && slices.EqualFunc(c.specs, tools, sameTool) {
		return c.raw, nil
	}
	raw, err := json.Marshal(wire(tools))
	if err != nil {
		return nil, err
	}
	specs := make([]core.ToolSpec, len(tools))
	for i, t := range tools {
		t.Params = slices.Clone(t.Params)
		specs[i] = t
	}
	c.specs, c.raw = specs, raw
	return raw, nil
}

// sameTool says a and b are the same tool, parameters included.
func sameTool(a, b core.ToolSpec) bool {
	return a.Plugin == b.Plugin && a.Action == b.Action && a.Description == b.Description && slices.Equal(a.Params, b.Params)
}

// jsonSchema is the parameters object of one tool.
type jsonSchema struct {
	Type       string                `json:"type"`
	Properties map[string]schemaProp `json:"properties"`
	Required   []string              `json:"required,omitempty"`
}

type schemaProp struct {
	Type        string      `json:"type"`
	Description string      `json:"description,omitempty"`
	Items       *schemaProp `json:"items,omitempty"`
}

// toolSchema builds the JSON schema of a tool's parameters: string-typed
// properties unless a param says otherwise, and the required list.
func toolSchema(t core.ToolSpec) jsonSchema {
	s := jsonSchema{Type: "object", Properties: make(map[string]schemaProp, len(t.Params))}
	for _, p := range t.Params {
		typ := p.Type
		if typ == "" {
			typ = "string"
		}
		prop := schemaProp{Type: typ, Description: p.Description}
		if typ == "array" {
			prop.Items = &schemaProp{Type: "string"}
		}
		s.Properties[p.Name] = prop
		if p.Required {
			s.Required = append(s.Required, p.Name)
		}
	}
	return s
}

// decodeArgs reads the JSON object of a tool call's arguments into core's
// map of strings: strings as they are, other values as their compact JSON
// text, nulls left out. An empty text means no arguments.
func decodeArgs(raw []byte) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return map[string]string{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tool arguments are not a JSON object: %w", err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if string(v) == "null" {
			continue
		}
		var s string
		if v[0] == '"' && json.Unmarshal(v, &s) == nil {
			out[k] = s
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("tool argument %q: %w", k, err)
		}
		out[k] = buf.String()
	}
	return out, nil
}

// encodeArgs renders core's arguments as a JSON object text.
func encodeArgs(args map[string]string) []byte {
	if args == nil {
		return []byte("{}")
	}
	b, err := json.Marshal(args)
	if err != nil { // a map of strings always marshals
		return []byte("{}")
	}
	return b
}

// toolCall builds a core.ToolCall from its wire parts.
func toolCall(id, name string, raw []byte) (core.ToolCall, error) {
	args, err := decodeArgs(raw)
	if err != nil {
		return core.ToolCall{}, fmt.Errorf("tool call %s (%s): %w", id, name, err)
	}
	p, a := SplitToolName(name)
	return core.ToolCall{ID: id, Plugin: p, Action: a, Args: args}, nil
}

// pendingCall is a tool call being assembled from stream deltas.
// maxToolName bounds a streamed tool call's name (its pieces are joined).
const maxToolName = 256

// pendingCall is a tool call being assembled from stream deltas.
type pendingCall struct {
	id, name string
	args     strings.Builder
}

// assembleCalls turns the streamed calls, keyed by their index in the
// answer, into tool calls in index order.
func assembleCalls(calls map[int]*pendingCall) ([]core.ToolCall, error) {
	idxs := make([]int, 0, len(calls))
	for i := range calls {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	var out []core.ToolCall
	for _, i := range idxs {
		pc := calls[i]
		tc, err := toolCall(pc.id, pc.name, []byte(pc.args.String()))
		if err != nil {
			return nil, err
		}
		out = append(out, tc)
	}
	return out, nil
}

// streamed completes r with the text and the tool calls a stream of
// provider id gathered.
func streamed(r *Response, text *strings.Builder, calls map[int]*pendingCall, id, secret string) (*Response, error) {
	r.Text = text.String()
	tcs, err := assembleCalls(calls)
	if err != nil {
		return nil, malformed(id, "tool call", err, secret)
	}
	r.ToolCalls = tcs
	return r, nil
}
