package routing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadProfilesFile(t *testing.T) {
	tests := []struct {
		name, body string
		mode       os.FileMode
		want       string // error substring; "" = loads
	}{
		{"valid", `{"anthropic":[{"id":"anthropic:a","type":"api_key","key":"k1"},{"id":"anthropic:o","type":"oauth","token":"t1"}],"openai":[{"id":"openai:default","key":"k2"}]}`, 0o600, ""},
		{"group readable", `{"openai":[{"id":"openai:default","key":"k"}]}`, 0o640, "chmod 600"},
		{"world readable", `{"openai":[{"id":"openai:default","key":"k"}]}`, 0o644, "chmod 600"},
		{"duplicate id", `{"a":[{"id":"default","key":"k"}],"b":[{"id":"default","key":"k"}]}`, 0o600, "used twice"},
		{"no id", `{"openai":[{"key":"k"}]}`, 0o600, `has no "id"`},
		{"no key", `{"openai":[{"id":"openai:x"}]}`, 0o600, `has no "key"`},
		{"bad type", `{"openai":[{"id":"openai:x","type":"password","key":"k"}]}`, 0o600, "use api_key, oauth or token"},
		{"bad json", `{"openai":`, 0o600, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "auth-profiles.json")
			if err := os.WriteFile(path, []byte(tc.body), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			got, err := LoadProfilesFile(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				a := got["anthropic"]
				if len(a) != 2 || a[0].Key != "k1" || a[0].OAuth || !a[1].OAuth || a[1].Key != "t1" || len(got["openai"]) != 1 {
					t.Fatalf("profiles = %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), `"k"`) || strings.Contains(err.Error(), "k1")) {
				t.Fatalf("error shows a key: %v", err)
			}
		})
	}
}
