package config

import "testing"

// A provider is local as models.providers.<id>.local says; unset, when its
// base URL is on this machine or a private network (issue 5).
func TestProviderIsLocal(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		base  string
		local *bool
		want  bool
	}{
		{"http://127.0.0.1:11434/v1", nil, true},
		{"http://localhost:8080/v1", nil, true},
		{"http://[::1]:8000/v1", nil, true},
		{"http://10.0.0.7:8000/v1", nil, true},
		{"http://192.168.1.20/v1", nil, true},
		{"https://api.openai.com/v1", nil, false},
		{"", nil, false},
		{"http://127.0.0.1:4000/v1", &no, false}, // a proxy in front of a cloud API
		{"https://gpu.example.com/v1", &yes, true},
	} {
		if got := (Provider{BaseURL: tt.base, Local: tt.local}).IsLocal(); got != tt.want {
			t.Errorf("base_url %q local %v: IsLocal = %v, want %v", tt.base, tt.local, got, tt.want)
		}
	}
}
