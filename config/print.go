package config

import (
	"bytes"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/core"
)

// Print writes the effective config as YAML with every secret shown as
// "***" (empty secrets stay empty), for `opentalon config check`.
func (c *Config) Print(w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return nil
}

// Redacted returns the output of Print as a string.
func (c *Config) Redacted() string {
	var b bytes.Buffer
	if err := c.Print(&b); err != nil {
		return err.Error()
	}
	return b.String()
}

// MarshalYAML is how `config check` prints a provider: a base URL that
// carries a credential (user:password@, ?key= as Gemini takes it) shows
// it as "***".
func (p Provider) MarshalYAML() (any, error) {
	type plain Provider // without this method
	q := plain(p)
	q.BaseURL = core.RedactURL(q.BaseURL)
	return q, nil
}

// MarshalYAML is how `config check` prints the Telegram block: an api_url
// with a credential (a proxy's user:password@) shows it as "***".
func (t Telegram) MarshalYAML() (any, error) {
	type plain Telegram // without this method
	q := plain(t)
	q.APIURL = core.RedactURL(q.APIURL)
	return q, nil
}

// MarshalYAML is how `config check` prints the Slack block (api_url as
// Telegram's).
func (s Slack) MarshalYAML() (any, error) {
	type plain Slack // without this method
	q := plain(s)
	q.APIURL = core.RedactURL(q.APIURL)
	return q, nil
}

// MarshalYAML is how `config check` prints the Discord block (api_url as
// Telegram's).
func (d Discord) MarshalYAML() (any, error) {
	type plain Discord // without this method
	q := plain(d)
	q.APIURL = core.RedactURL(q.APIURL)
	return q, nil
}
