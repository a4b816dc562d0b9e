package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
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

// Secret holds a credential; it is core.Secret, redacted wherever it is
// printed, logged or encoded.
type Secret = core.Secret

// CredentialURL is a URL that may carry a credential in its path, query
// or user info (Slack's and Discord's incoming webhooks carry their token
// in the path): it prints, logs and encodes as its scheme and host only.
// Use string(u) for the URL itself.
type CredentialURL string

// String is the URL without what may be a credential.
func (u CredentialURL) String() string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(string(u))
	if err != nil || p.Host == "" {
		return "[a URL, redacted]"
	}
	out := p.Scheme + "://" + p.Host
	if strings.Trim(p.Path, "/") != "" || p.RawQuery != "" || p.Fragment != "" {
		out += "/…"
	}
	return out
}

// MarshalYAML writes the redacted form (opentalon config check).
func (u CredentialURL) MarshalYAML() (any, error) { return u.String(), nil }

// LogValue implements slog.LogValuer with the redacted form.
func (u CredentialURL) LogValue() slog.Value { return slog.StringValue(u.String()) }
