package provider

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/metrics"
	"strings"
	"testing"
)

// allocated is the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// hostileStreams are event streams a provider (or whatever answers in its
// place) could send: each is repeated to the size wanted.
var hostileStreams = map[string]struct{ head, unit, tail string }{
	"one event of many data lines": {"", "data: x\n", ""},
	"many text deltas":             {"", `data: {"choices":[{"delta":{"content":"xxxxxxxx"}}]}` + "\n\n", "data: [DONE]\n\n"},
	"tool name in pieces":          {"", `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"aaaaaaaa"}}]}}]}` + "\n\n", "data: [DONE]\n\n"},
	"many tool calls":              {"", `data: {"choices":[{"delta":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n", "data: [DONE]\n\n"},
	"comments":                     {"", ": keep-alive\n", ""},
	"anthropic text deltas":        {`data: {"type":"message_start","message":{"model":"m"}}` + "\n\n", `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"xxxxxxxx"}}` + "\n\n", `data: {"type":"message_stop"}` + "\n\n"},
	"anthropic json deltas":        {`data: {"type":"message_start","message":{"model":"m"}}` + "\n\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}` + "\n\n", `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1,"}}` + "\n\n", `data: {"type":"message_stop"}` + "\n\n"},
}

func hostileStream(name string, n int) string {
	h := hostileStreams[name]
	body := strings.Repeat(h.unit, n/len(h.unit)+1)
	return h.head + body[:n-n%len(h.unit)] + h.tail
}

// readHostile reads a stream as the provider named by it would.
func readHostile(name string, body io.Reader) (*Response, error) {
	cl := &call{resp: &http.Response{StatusCode: 200, Body: io.NopCloser(body)}}
	if strings.HasPrefix(name, "anthropic") {
		return NewAnthropic(Options{ID: "a"}).readStream(cl, func(string) {}, "")
	}
	return NewOpenAI(Options{ID: "o"}).readStream(cl, func(string) {}, "")
}

// Issue 25: nothing a provider sends can make the gateway allocate
// without bound: 1 MB of any of these streams allocates at most 64 MB,
// and a stream past the answer limit is refused as malformed.
func TestHostileStreamsAreBounded(t *testing.T) {
	for name := range hostileStreams {
		t.Run(name, func(t *testing.T) {
			in := hostileStream(name, 1<<20)
			var err error
			alloc := allocated(func() { _, err = readHostile(name, strings.NewReader(in)) })
			if alloc > 64<<20 {
				t.Fatalf("1 MB allocated %d MB (err %v); want at most 64", alloc>>20, err)
			}
		})
	}
	t.Run("past the answer limit", func(t *testing.T) {
		h := hostileStreams["comments"]
		_, err := readHostile("comments", strings.NewReader(strings.Repeat(h.unit, (maxBody+1<<20)/len(h.unit))))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(maxBody)) {
			t.Errorf("%d MB of comments: err = %v; want the stream refused at the answer limit", (maxBody+1<<20)>>20, err)
		}
		// One event of data lines past the limit (a smaller one here).
		sse := newSSEReader(strings.NewReader(hostileStream("one event of many data lines", 2<<20)))
		sse.limit = 1 << 20
		if _, err := sse.Next(); !errors.Is(err, errStreamTooLong) {
			t.Errorf("2 MB of data lines under a 1 MB limit: err = %v; want errStreamTooLong", err)
		}
	})
}
