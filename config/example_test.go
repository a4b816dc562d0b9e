package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestExampleConfig keeps examples/config.yaml loadable and complete.
func TestExampleConfig(t *testing.T) {
	env := MapEnv(map[string]string{
		"HOME":              "/home/tester",
		"ANTHROPIC_API_KEY": "sk-ant",
		"OPENAI_API_KEY":    "sk-oa",
	})
	cfg, err := Load("../examples/config.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Routing.Primary != "anthropic/claude-haiku-4-5" || cfg.State.DataDir != "/home/tester/.opentalon" {
		t.Errorf("unexpected example values: primary %q data_dir %q", cfg.Routing.Primary, cfg.State.DataDir)
	}
	// Every key of the typed tree appears in the example.
	for _, key := range allKeys(reflect.TypeOf(Config{})) {
		if !strings.Contains(exampleText(t), key+":") {
			t.Errorf("examples/config.yaml does not mention key %q", key)
		}
	}
	// Without the provider keys the example names the missing variables.
	_, err = Load("../examples/config.yaml", MapEnv(map[string]string{"HOME": "/h"}))
	ps := problemsOf(t, err)
	if len(ps) != 2 {
		t.Errorf("want 2 problems (two unset keys), got %v", err)
	}
	mustContain(t, err.Error(), "ANTHROPIC_API_KEY is not set", "OPENAI_API_KEY is not set")
}

func exampleText(t *testing.T) string {
	t.Helper()
	b, err := readFile("../examples/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allKeys lists every yaml key name in the struct tree.
func allKeys(t reflect.Type) []string {
	var out []string
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		tag, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" && opts == "inline" {
			out = append(out, allKeys(t.Field(i).Type)...)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		out = append(out, tag)
		out = append(out, allKeys(t.Field(i).Type)...)
	}
	return out
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
