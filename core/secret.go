package core

import (
	"fmt"
	"log/slog"
)

// Secret holds a credential (an API key, a bot token, a webhook secret).
// Every way of printing it is redacted: String, GoString (%#v), LogValue
// (log/slog), and the text, JSON and YAML encodings. Value returns the
// real string and is called only where the credential is sent.
type Secret string

const redacted = "***"

// Value returns the secret itself.
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

// MarshalText redacts, so JSON and other text encoders never show it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML redacts, so printing a config never shows credentials.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }
