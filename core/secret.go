package core

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
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

// RedactURL is raw without what in a URL may be a credential: the
// password of its user info and the values of its query (a provider that
// takes its key as ?key=) become "***"; scheme, host, path and the names
// of the query's parameters stay, so the URL still says where it points.
// Text that does not parse as a URL is shown only when it has neither
// user info nor a query.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return "[a URL that does not parse, redacted: it may hold a credential]"
		}
		return raw
	}
	_, hasPassword := u.User.Password()
	if !hasPassword && u.RawQuery == "" {
		return raw // nothing to hide: as written, not as url.URL spells it
	}
	if hasPassword {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i := range vs {
				vs[i] = redacted
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	// url.URL.String escapes the ***; put it back.
	return strings.ReplaceAll(u.String(), "%2A%2A%2A", redacted)
}

// minURLSecret is the shortest part of a URL URLSecrets returns: a
// shorter query value ("1", "json") is no credential, and hiding it
// wherever it stands would garble the text.
const minURLSecret = 8

// URLSecrets are the parts of raw that RedactURL hides (its password,
// its query's values) of at least minURLSecret bytes, as written and
// escaped (and user:password as Basic auth encodes it), for scrubbing them from text that quotes the URL as it was
// sent (a transport error, a server's error page).
func URLSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var vals, basic []string
	if pw, ok := u.User.Password(); ok {
		vals = append(vals, pw)
		if len(pw) >= minURLSecret {
			// Go's HTTP client sends user:password@ as "Authorization:
			// Basic base64(user:password)" when nothing else sets
			// Authorization; an error page may quote it.
			basic = append(basic, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
		}
	}
	for _, vs := range u.Query() {
		vals = append(vals, vs...)
	}
	var out []string
	for _, v := range vals {
		if len(v) < minURLSecret {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.Contains(out, form) {
				out = append(out, form)
			}
		}
	}
	return append(out, basic...)
}
