package plugins

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
)

// Credentials are the plugins' own keys to the core's HTTP API. Each
// plugin process gets a random one of its own as OPENTALON_API_KEY (never
// server.api_key, which opens every plugin's private routes, the status
// page and /metrics): it opens the plugin LLM API and that plugin's own
// private routes, nothing else. A key lives as long as its process; a
// restarted plugin gets a new one. Safe for concurrent use.
type Credentials struct {
	mu sync.Mutex
	// byKey maps a key to the plugin name it was given to ("" until the
	// plugin has said its name).
	byKey map[string]string
}

// NewCredentials returns an empty set of plugin keys.
func NewCredentials() *Credentials { return &Credentials{byKey: map[string]string{}} }

// issue makes a new key for a plugin process about to start.
func (c *Credentials) issue() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key := "otp_" + hex.EncodeToString(b)
	c.mu.Lock()
	c.byKey[key] = ""
	c.mu.Unlock()
	return key
}

// bind ties a key to the name its plugin declared.
func (c *Credentials) bind(key, name string) {
	c.mu.Lock()
	if _, ok := c.byKey[key]; ok {
		c.byKey[key] = name
	}
	c.mu.Unlock()
}

// revoke ends a key (its process stopped).
func (c *Credentials) revoke(key string) {
	c.mu.Lock()
	delete(c.byKey, key)
	c.mu.Unlock()
}

// plugin returns the plugin whose key got presented ("" and false for
// none). Keys are compared in constant time.
func (c *Credentials) plugin(got string) (string, bool) {
	if c == nil || got == "" {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, name := range c.byKey {
		if subtle.ConstantTimeCompare([]byte(got), []byte(key)) == 1 {
			return name, true
		}
	}
	return "", false
}

// Keys are who may call the core's HTTP API: the operator with
// server.api_key, and each plugin with its own credential.
type Keys struct {
	// Operator is server.api_key ("" = none).
	Operator string
	// Plugins are the plugins' own keys (nil = none).
	Plugins *Credentials
}

// caller says who presented a key (X-API-Key or "Authorization: Bearer"):
// the operator, or the plugin named plugin; ok is false for no valid key.
func (k Keys) caller(r *http.Request) (plugin string, operator, ok bool) {
	got := presentedKey(r)
	if got == "" {
		return "", false, false
	}
	if k.Operator != "" && subtle.ConstantTimeCompare([]byte(got), []byte(k.Operator)) == 1 {
		return "", true, true
	}
	name, ok := k.Plugins.plugin(got)
	return name, false, ok
}

// any reports whether some key is configured at all.
func (k Keys) any() bool { return k.Operator != "" || k.Plugins != nil }

func presentedKey(r *http.Request) string {
	got := r.Header.Get("X-API-Key")
	if got == "" {
		if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			got = strings.TrimSpace(auth[7:])
		}
	}
	return got
}
