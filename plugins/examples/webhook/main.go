package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opentalon/opentalon/plugins/sdk"
)

// settings is webhook.json next to the binary.
type settings struct {
	// Secret is the webhook secret set in GitHub.
	Secret string `json:"secret"`
	// Channel and Chat are where conversations start and the digest goes.
	Channel string `json:"channel"`
	Chat    string `json:"chat"`
	// DigestCron is when the digest is posted (five cron fields).
	DigestCron string `json:"digest_cron"`
}

type webhook struct {
	s  settings
	st *sdk.State
}

func (w *webhook) Capabilities() sdk.Capabilities {
	c := sdk.Capabilities{
		Name:        "webhook",
		Description: "GitHub webhooks start conversations about new issues and pull requests.",
		Routes: []sdk.Route{
			{Method: "POST", Path: "github", Public: true}, // GitHub signs; checked in ServeHTTP
			{Method: "GET", Path: "stats"},                 // needs server.api_key
		},
	}
	if w.s.DigestCron != "" {
		c.Schedules = []sdk.Schedule{{ID: "digest", Cron: w.s.DigestCron, Channel: w.s.Channel, Chat: w.s.Chat}}
	}
	return c
}

func (w *webhook) Execute(context.Context, sdk.Call) (string, error) {
	return "", fmt.Errorf("webhook has no actions")
}

// event is the part of a GitHub issues or pull_request event it reads.
type event struct {
	Action string `json:"action"`
	Issue  *item  `json:"issue"`
	PR     *item  `json:"pull_request"`
	Repo   struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

type item struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	URL    string `json:"html_url"`
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	// Serve by the route the core matched and checked, not by the path
	// again: "stats/" is the route "stats" too (docs/plugins.md).
	route, _ := sdk.MatchedRoute(r)
	switch route.Path {
	case "stats":
		n := w.count(r.Context(), "received")
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"received":%d,"conversations":%d}`, n, w.count(r.Context(), "started"))
		return
	case "github":
	default:
		http.NotFound(rw, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, "cannot read the body", http.StatusBadRequest)
		return
	}
	if !sdk.VerifyHMAC([]byte(w.s.Secret), body, r.Header.Get("X-Hub-Signature-256")) {
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	w.add(r.Context(), "received")
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(rw, "not JSON", http.StatusBadRequest)
		return
	}
	it, kind := ev.Issue, "issue"
	if ev.PR != nil {
		it, kind = ev.PR, "pull request"
	}
	if ev.Action != "opened" || it == nil {
		rw.WriteHeader(http.StatusNoContent) // nothing to talk about
		return
	}
	msg := sdk.Message{Channel: w.s.Channel, Chat: w.s.Chat, UserID: "github", UserName: "GitHub",
		ID:   r.Header.Get("X-GitHub-Delivery"), // GitHub redelivers with the same id
		Text: fmt.Sprintf("New %s #%d in %s: %q (%s). Summarize what it is about in two sentences.", kind, it.Number, ev.Repo.FullName, it.Title, it.URL)}
	if err := sdk.Inject(r, msg); err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	w.add(r.Context(), "started")
	rw.WriteHeader(http.StatusAccepted)
}

// OnSchedule posts the digest and starts counting again.
func (w *webhook) OnSchedule(ctx context.Context, f sdk.Firing) (sdk.ScheduleResult, error) {
	n := w.count(ctx, "started")
	if n == 0 {
		return sdk.ScheduleResult{Skip: true}, nil
	}
	if w.st != nil {
		if err := w.st.Set(ctx, "started", "0"); err != nil {
			return sdk.ScheduleResult{}, err
		}
	}
	return sdk.ScheduleResult{Text: fmt.Sprintf("GitHub digest: %d new issues and pull requests since the last one.", n)}, nil
}

func (w *webhook) count(ctx context.Context, key string) int {
	if w.st == nil {
		return 0
	}
	v, _, _ := w.st.Get(ctx, key)
	n, _ := strconv.Atoi(v)
	return n
}

func (w *webhook) add(ctx context.Context, key string) {
	if w.st != nil {
		w.st.Set(ctx, key, strconv.Itoa(w.count(ctx, key)+1))
	}
}

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := &webhook{}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "webhook.json"))
	if err == nil {
		err = json.Unmarshal(b, &w.s)
	}
	if err != nil || w.s.Secret == "" || w.s.Channel == "" || w.s.Chat == "" {
		fmt.Fprintln(os.Stderr, "webhook: put webhook.json next to the binary with secret, channel and chat (and digest_cron):", err)
		os.Exit(1)
	}
	if w.st, err = sdk.OpenState(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := sdk.Serve(w); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
