package main

import (
	"testing"

	"github.com/opentalon/opentalon/config"
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
	} {
		if got := modelsURL(tt.p); got != tt.want {
			t.Errorf("modelsURL(%s %q) = %q, want %q", tt.p.API, tt.p.BaseURL, got, tt.want)
		}
	}
}
