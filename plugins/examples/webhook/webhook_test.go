package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestWebhookPlugin(t *testing.T) {
	bin := plugintest.Build(t, ".")
	os.WriteFile(filepath.Join(filepath.Dir(bin), "webhook.json"), []byte(`{"secret":"gh-secret","channel":"slack","chat":"C0123456","digest_cron":"0 9 * * 1-5"}`), 0o600)
	c := plugintest.Start(t, bin, plugintest.Options{APIKey: "k"})
	post := func(body, sig string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/plugins/webhook/github", strings.NewReader(body))
		r.Header.Set("X-Hub-Signature-256", sig)
		r.Header.Set("X-GitHub-Delivery", "72d3162e")
		return c.HTTP(r)
	}
	pr := `{"action":"opened","pull_request":{"number":12,"title":"Add retries","html_url":"https://github.com/o/r/pull/12"},"repository":{"full_name":"o/r"}}`
	if w := post(pr, sign("gh-secret", pr)); w.Code != http.StatusAccepted {
		t.Fatalf("signed event = %d %s", w.Code, w.Body)
	}
	in := c.Injected()
	want := plugins.Injection{Plugin: "webhook", Channel: "slack", Chat: "C0123456", UserID: "github", UserName: "GitHub", ID: "72d3162e",
		Text: `New pull request #12 in o/r: "Add retries" (https://github.com/o/r/pull/12). Summarize what it is about in two sentences.`}
	if len(in) != 1 || in[0] != want {
		t.Fatalf("injected %+v", in)
	}
	if w := post(pr, sign("wrong", pr)); w.Code != http.StatusUnauthorized || len(c.Injected()) != 1 {
		t.Fatalf("forged event = %d, %d injected", w.Code, len(c.Injected()))
	}
	closed := `{"action":"closed","issue":{"number":3}}`
	if w := post(closed, sign("gh-secret", closed)); w.Code != http.StatusNoContent || len(c.Injected()) != 1 {
		t.Fatalf("closed issue = %d", w.Code)
	}
	// stats needs the API key.
	r := httptest.NewRequest("GET", "/api/plugins/webhook/stats", nil)
	if w := c.HTTP(r); w.Code != http.StatusUnauthorized {
		t.Fatalf("stats without key = %d", w.Code)
	}
	r.Header.Set("X-API-Key", "k")
	if w := c.HTTP(r); w.Code != 200 || w.Body.String() != `{"received":2,"conversations":1}` {
		t.Fatalf("stats = %d %s", w.Code, w.Body)
	}
	// The core serves stats/ as the route stats; the plugin answers it by
	// that route.
	r = httptest.NewRequest("GET", "/api/plugins/webhook/stats/", nil)
	r.Header.Set("X-API-Key", "k")
	if w := c.HTTP(r); w.Code != 200 || !strings.HasPrefix(w.Body.String(), `{"received":2,`) {
		t.Fatalf("stats/ = %d %s", w.Code, w.Body)
	}
	if s := c.Capabilities().Schedules; len(s) != 1 || s[0].Cron != "0 9 * * 1-5" || s[0].Chat != "C0123456" {
		t.Fatalf("schedules = %+v", s)
	}
	res, err := c.Fire("digest", time.Now())
	if err != nil || res.Text != "GitHub digest: 1 new issues and pull requests since the last one." {
		t.Fatalf("digest = %+v %v", res, err)
	}
	if res, _ := c.Fire("digest", time.Now()); !res.Skip {
		t.Fatalf("an empty digest = %+v; want skipped", res)
	}
}
