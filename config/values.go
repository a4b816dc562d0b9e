package config

import (
	"fmt"
	"log/slog"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as a Go duration string ("30s", "5m").
type Duration time.Duration

// D returns the standard library duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string, or 0.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeErr(n.Line, "expected a duration such as \"30s\" or \"5m\"")
	}
	if n.Value == "0" || n.Value == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return typeErr(n.Line, fmt.Sprintf("%q is not a duration; write e.g. \"30s\", \"5m\" or \"1h\"", n.Value))
	}
	if v < 0 {
		return typeErr(n.Line, fmt.Sprintf("duration %q must not be negative", n.Value))
	}
	*d = Duration(v)
	return nil
}

// typeErr is a *yaml.TypeError so the decoder keeps collecting problems.
func typeErr(line int, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", line, msg)}}
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Secret holds a credential. String, LogValue, GoString and the YAML form
// are redacted; Value returns the real string.
type Secret string

const redacted = "***"

// Value returns the secret itself; use it only where the credential is sent.
func (s Secret) Value() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

// String redacts: "***" when set, "" when empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// LogValue redacts for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalYAML redacts, so printing a config never shows credentials.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText redacts, so JSON and other text encoders never show it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
