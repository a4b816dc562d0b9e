package config

import (
	"bytes"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
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
