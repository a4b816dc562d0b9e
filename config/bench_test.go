package config

import "testing"

func BenchmarkLoadExample(b *testing.B) {
	env := MapEnv(map[string]string{"HOME": "/h", "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"})
	for b.Loop() {
		if _, err := Load("../examples/config.yaml", env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExpand(b *testing.B) {
	env := MapEnv(map[string]string{"A": "value"})
	for b.Loop() {
		if _, err := expand("prefix-${A}-${B:-default}-$$", env); err != nil {
			b.Fatal(err)
		}
	}
}
