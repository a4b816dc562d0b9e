package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestModelsURL: the model list is asked where the provider's own calls
// go, whichever way its base_url is written.
func TestModelsURL(t *testing.T) {
	for _, tt := range []struct {
		p    config.Provider
		want string
	}{
		{config.Provider{API: config.APIAnthropicMessages}, "https://api.anthropic.com/v1/models"},
		{config.Provider{API: config.APIAnthropicMessages, BaseURL: "http://127.0.0.1:9/"}, "http://127.0.0.1:9/v1/models"},
		{config.Provider{API: config.APIAnthropicMessages, BaseURL: "http://127.0.0.1:9/v1"}, "http://127.0.0.1:9/v1/models"},
		{config.Provider{API: config.APIAnthropicMessages, BaseURL: "http://127.0.0.1:9/v1/"}, "http://127.0.0.1:9/v1/models"},
		{config.Provider{BaseURL: "http://127.0.0.1:9/v1"}, "http://127.0.0.1:9/v1/models"},
		// A key in the query stays after the whole path.
		{config.Provider{BaseURL: "http://127.0.0.1:9/v1/?key=K"}, "http://127.0.0.1:9/v1/models?key=K"},
		{config.Provider{API: config.APIAnthropicMessages, BaseURL: "http://127.0.0.1:9/v1?key=K"}, "http://127.0.0.1:9/v1/models?key=K"},
	} {
		if got := modelsURL(tt.p); got != tt.want {
			t.Errorf("modelsURL(%s %q) = %q, want %q", tt.p.API, tt.p.BaseURL, got, tt.want)
		}
	}
}

// TestURLFixFitsTheAPI: the fix for an unreachable provider shows the
// URL's shape for the API it speaks (only an OpenAI-compatible one needs
// the /v1), and names the variable or config key to change.
func TestURLFixFitsTheAPI(t *testing.T) {
	for _, tt := range []struct {
		p         config.Provider
		want, not string
	}{
		{config.Provider{API: config.APIOpenAICompletions, URLVar: "OPENAI_BASE_URL"}, "set OPENAI_BASE_URL to a server this machine reaches (an OpenAI-compatible URL includes /v1", "Anthropic"},
		{config.Provider{API: config.APIAnthropicMessages, URLVar: "ANTHROPIC_BASE_URL", BaseURL: "http://127.0.0.1:9"}, "set ANTHROPIC_BASE_URL to the URL of one that runs (an Anthropic-compatible server, with or without /v1", "OpenAI"},
		{config.Provider{API: config.APIAnthropicMessages}, "check models.providers.p.base_url", "/v1"},
	} {
		got := urlFix("p", tt.p)
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.not) {
			t.Errorf("urlFix(%s, %q) = %q; want it to contain %q and not %q", tt.p.API, tt.p.URLVar, got, tt.want, tt.not)
		}
	}
}

// TestProviderWarningOnATerminalIsText: the warning shown on the console's
// terminal at start quotes the model ids the provider lists; an escape
// sequence among them is shown, not acted on.
func TestProviderWarningOnATerminalIsText(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	base := modelsFront(t, llm, "", "llama3.1\x1b[2J\x1b]52;c;aGk=\x07", "qwen\u009b31m\u202e")
	cfg, err := config.Parse("test.yaml", []byte(withTestStore(t, fmt.Sprintf(`models:
  providers:
    fake: { api: openai-completions, base_url: %q }
  catalog:
    fake/small-model: { weight: 80 }
routing: { primary: fake/small-model }
server: { listen: "" }
`, base))), t.TempDir(), config.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := checkProvidersAtStart(context.Background(), cfg, log, &stderr, true); err != nil {
		t.Fatal(err)
	}
	got := stderr.String()
	if !strings.Contains(got, "is not among the models") {
		t.Fatalf("no warning of the model the provider does not list: %q", got)
	}
	if strings.ContainsAny(got, "\x1b\x07\u009b\u202e") {
		t.Fatalf("the terminal warning holds what a terminal acts on: %q", got)
	}
	if !strings.Contains(got, `llama3.1\x1b[2J`) {
		t.Fatalf("the warning does not show the escape as text: %q", got)
	}
}

// TestProviderRefusalOnATerminalIsText: when the only provider refuses
// the credential, run ends with an error printed on stderr that quotes
// the provider's HTTP status line; an escape sequence there is shown,
// not acted on.
func TestProviderRefusalOnATerminalIsText(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rd := bufio.NewReader(c)
			for {
				line, err := rd.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 401 No\x1b[2J\x1b]52;c;aGk=\x07\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			c.Close()
		}
	}()
	cfg, err := config.Parse("test.yaml", []byte(withTestStore(t, fmt.Sprintf(`models:
  providers:
    fake: { api: openai-completions, base_url: "http://%s/v1", api_key: sk-test }
  catalog:
    fake/small-model: { weight: 80 }
routing: { primary: fake/small-model }
server: { listen: "" }
`, ln.Addr()))), t.TempDir(), config.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	err = checkProvidersAtStart(context.Background(), cfg, log, &stderr, true)
	if err == nil || !strings.Contains(err.Error(), "refused the credential") {
		t.Fatalf("checkProvidersAtStart: %v; want the refused credential", err)
	}
	if strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Fatalf("the error printed on the terminal holds what a terminal acts on: %q", err)
	}
	if !strings.Contains(err.Error(), `No\x1b[2J`) {
		t.Fatalf("the error does not show the escape as text: %q", err)
	}
}
