package status

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Store is what the page reads of the database (store.DB).
type Store interface {
	QueueCounts(ctx context.Context) (map[string]int, error)
	OldestQueued(ctx context.Context) (time.Time, error)
	RecentFailures(ctx context.Context, limit int) ([]core.QueueFailure, error)
	UsageSeries(ctx context.Context, since time.Time, step time.Duration, by string) ([]core.UsagePoint, error)
	Affinities(ctx context.Context) ([]core.Affinity, error)
}

// Channel is one channel's liveness.
type Channel struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// Error says why it is down.
	Error     string     `json:"error,omitempty"`
	LastEvent *time.Time `json:"last_event,omitempty"`
	Restarts  int        `json:"restarts"`
}

// Credential is one auth profile's use and cooldown. The credential
// itself is never shown.
type Credential struct {
	Provider     string     `json:"provider"`
	Profile      string     `json:"profile"`
	Uses         int64      `json:"uses"`
	CoolingUntil *time.Time `json:"cooling_until,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	// Failing says every recent call of the provider failed although the
	// credential is not cooling (a server that does not answer).
	Failing string `json:"failing,omitempty"`
}

// Model is one model's recent calls (the last 15 minutes).
type Model struct {
	Model    string `json:"model"`
	Provider string `json:"provider"`
	Calls    int    `json:"calls"`
	// State is ok, degraded (some calls failed) or failing (all did).
	State string `json:"state"`
	// Failures counts the failed calls by kind.
	Failures    map[string]int `json:"failures"`
	LastFailure *time.Time     `json:"last_failure,omitempty"`
}

// Plugin is one tool plugin's health.
type Plugin struct {
	Name     string `json:"name"`
	Up       bool   `json:"up"`
	Restarts int    `json:"restarts"`
}

// Script is one Lua script's health.
type Script struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
	// Loaded says a version of the file runs (false: every version so
	// far failed to compile).
	Loaded bool `json:"loaded"`
	// Version is the running version's content (12 hex digits of its
	// SHA-256) and Modified its file's modification time.
	Version  string     `json:"version,omitempty"`
	Modified *time.Time `json:"modified,omitempty"`
	// ReloadError is why the file on disk does not load (file:line);
	// the version above keeps running. Cleared when a good one loads.
	ReloadError string `json:"reload_error,omitempty"`
}

// Cluster is the replicas sharing the database and who holds which
// singleton lease (state.driver: postgres; on SQLite the one process).
type Cluster struct {
	// Replica is this replica's id.
	Replica  string         `json:"replica"`
	Replicas []core.Replica `json:"replicas"`
	Leases   []Lease        `json:"leases"`
	// Warnings say when the live replicas run different versions or
	// configs.
	Warnings []string `json:"warnings"`
}

// Lease is one singleton role and its holder.
type Lease struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	Held   bool   `json:"held"`
	Epoch  int64  `json:"epoch"`
}

// ClusterOf builds the cluster section from the replicas heard from
// lately and the leases: a warning when the live replicas differ in
// version or config.
func ClusterOf(self string, replicas []core.Replica, leases []core.LeaseInfo, now time.Time) Cluster {
	c := Cluster{Replica: self, Replicas: []core.Replica{}, Leases: []Lease{}, Warnings: []string{}}
	versions, configs := map[string][]string{}, map[string][]string{}
	for _, r := range replicas {
		c.Replicas = append(c.Replicas, r)
		if r.Stopped.IsZero() {
			versions[r.Version] = append(versions[r.Version], r.ID)
			configs[r.ConfigHash] = append(configs[r.ConfigHash], r.ID)
		}
	}
	if len(versions) > 1 {
		c.Warnings = append(c.Warnings, "the replicas run different versions: "+describeGroups(versions))
	}
	if len(configs) > 1 {
		c.Warnings = append(c.Warnings, "the replicas run different configs: "+describeGroups(configs))
	}
	for _, l := range leases {
		c.Leases = append(c.Leases, Lease{Name: l.Name, Holder: l.Holder, Held: l.Held(now), Epoch: l.Epoch})
	}
	return c
}

func describeGroups(g map[string][]string) string {
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range g {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s on %s", k, strings.Join(g[k], ", ")))
	}
	return strings.Join(parts, "; ")
}

// Options configure New. Store is required; the other sources are
// optional (an absent one shows an empty section).
type Options struct {
	Store       Store
	Channels    func() []Channel
	Credentials func() []Credential
	Models      func() []Model
	Plugins     func() []Plugin
	Scripts     func() []Script
	// Cluster reads the replicas and the leases (nil = no section).
	Cluster func(ctx context.Context) (Cluster, error)
	// Score summarizes an affinity record as the router sees it now: the
	// acceptance rate and the decayed evidence behind it.
	Score func(a core.Affinity, now time.Time) (score, evidence float64)
	// Choices says, per task type, which model the router chooses and
	// why (nil = not shown).
	Choices func(ctx context.Context) []Choice
	// Version and Started are shown in the header.
	Version string
	Started time.Time
	// APIKey is server.api_key. Open says the server listens on loopback
	// only: then no key is asked of a request addressed to a loopback
	// name or to Listen's host (server.listen).
	APIKey string
	Open   bool
	Listen string
	Now    func() time.Time
	Logger *slog.Logger
}

// Page is the status page and its API. Safe for concurrent use.
type Page struct {
	o      Options
	assets map[string]asset
	csp    string
	log    *slog.Logger
}

// New builds the page; it serves nothing until mounted.
func New(o Options) *Page {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Score == nil {
		o.Score = func(a core.Affinity, _ time.Time) (float64, float64) {
			if ev := a.Pos + a.Neg; ev > 0 {
				return a.Pos / ev, ev
			}
			return 0.5, 0
		}
	}
	p := &Page{o: o, log: o.Logger.With("component", "status")}
	p.assets, p.csp = loadAssets()
	return p
}

// Mount adds the page and its API to mux: GET / and /ui/ (the embedded
// assets, which hold no data; see pageHost), GET /api/status, /api/usage
// and /api/affinity (behind Protect).
func (p *Page) Mount(mux *http.ServeMux) {
	mux.Handle("GET /{$}", p.pageHost(p.serveAsset("index.html")))
	mux.Handle("GET /ui/{file}", p.pageHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serveAsset(r.PathValue("file"))(w, r)
	})))
	mux.Handle("GET /api/status", p.Protect(http.HandlerFunc(p.serveStatus)))
	mux.Handle("GET /api/usage", p.Protect(http.HandlerFunc(p.serveUsage)))
	mux.Handle("GET /api/affinity", p.Protect(http.HandlerFunc(p.serveAffinity)))
}

// Protect lets a request through when it presents server.api_key as
// "Authorization: Bearer <key>" or X-API-Key, or, when the server listens
// on loopback only, when it is addressed to this machine: its Host is a
// loopback name (localhost, 127.0.0.1, [::1]) or server.listen's own
// host, and a request that changes something comes from no other web
// page (Origin). A web page the operator visits could otherwise read the
// page through DNS rebinding: its own name, resolved to 127.0.0.1, is no
// loopback name. Otherwise it answers 401 (or 403 when no key is set on a
// server reachable from elsewhere, or for a foreign Host).
func (p *Page) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.o.APIKey != "" && keyMatches(r, p.o.APIKey) {
			h.ServeHTTP(w, r)
			return
		}
		if p.o.Open {
			if !p.localHost(r.Host) {
				writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("without a key the status API answers only requests addressed to this machine (Host localhost, 127.0.0.1, [::1] or %s), not %q; open it by that address, or send server.api_key", p.o.Listen, r.Host)})
				return
			}
			if origin := r.Header.Get("Origin"); !safeMethod(r.Method) && origin != "" && !p.localOrigin(origin) {
				writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("a request from the web page %s may not change anything here", origin)})
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		if p.o.APIKey == "" {
			writeJSON(w, http.StatusForbidden, apiError{"the server listens beyond loopback and server.api_key is not set: set server.api_key to use the status page and /metrics, or listen on 127.0.0.1 only"})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="opentalon"`)
		writeJSON(w, http.StatusUnauthorized, apiError{"missing or wrong API key: send server.api_key as Authorization: Bearer <key> or X-API-Key"})
	})
}

// pageHost serves the page's assets on a server that listens on loopback
// only as Protect serves its data there (and as docs/status.md says of
// the page, the API and /metrics alike): to a request addressed to this
// machine, or one that carries server.api_key; any other Host is refused
// (issue 25, finding 10: the status page on loopback must not answer any
// Host). Beyond loopback the assets, which hold no data, are served to
// any Host: the page asks for the key before it shows anything.
func (p *Page) pageHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.o.Open && !p.localHost(r.Host) && (p.o.APIKey == "" || !keyMatches(r, p.o.APIKey)) {
			writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("the status page on loopback answers only requests addressed to this machine (Host localhost, 127.0.0.1, [::1] or %s), not %q; open it by that address, or send server.api_key", p.o.Listen, r.Host)})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// localHost reports whether a Host header names this machine: a loopback
// name or address, or server.listen's own host.
func (p *Page) localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	if lh, _, err := net.SplitHostPort(p.o.Listen); err == nil && lh != "" {
		return strings.EqualFold(strings.Trim(lh, "[]"), host)
	}
	return false
}

// localOrigin reports whether an Origin is a page served by this machine.
func (p *Page) localOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && p.localHost(u.Host)
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func keyMatches(r *http.Request, key string) bool {
	got := r.Header.Get("X-API-Key")
	if auth := r.Header.Get("Authorization"); got == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		got = strings.TrimSpace(auth[7:])
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(key)) == 1
}

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Status is the body of GET /api/status.
type Status struct {
	Version     string       `json:"version"`
	Now         time.Time    `json:"now"`
	Started     time.Time    `json:"started"`
	Channels    []Channel    `json:"channels"`
	Queue       Queue        `json:"queue"`
	Credentials []Credential `json:"credentials"`
	Models      []Model      `json:"models"`
	Plugins     []Plugin     `json:"plugins"`
	Scripts     []Script     `json:"scripts"`
	Cluster     *Cluster     `json:"cluster,omitempty"`
}

// Queue is the queue's state and its latest failures.
type Queue struct {
	Queued           int       `json:"queued"`
	Running          int       `json:"running"`
	Done             int       `json:"done"`
	Failed           int       `json:"failed"`
	OldestAgeSeconds float64   `json:"oldest_age_seconds"`
	Failures         []Failure `json:"failures"`
}

// Failure is a request that failed for good.
type Failure struct {
	ID      int64     `json:"id"`
	Channel string    `json:"channel"`
	Kind    string    `json:"kind"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// maxFailures is how many recent failures /api/status lists.
const maxFailures = 20

func (p *Page) serveStatus(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := p.o.Now()
	st := Status{Version: p.o.Version, Now: now, Started: p.o.Started,
		Channels: []Channel{}, Credentials: []Credential{}, Models: []Model{}, Plugins: []Plugin{}, Scripts: []Script{}}
	counts, err := p.o.Store.QueueCounts(ctx)
	if err != nil {
		p.fail(w, "queue counts", err)
		return
	}
	st.Queue = Queue{Queued: counts[core.StatusQueued], Running: counts[core.StatusRunning], Done: counts[core.StatusDone], Failed: counts[core.StatusFailed], Failures: []Failure{}}
	oldest, err := p.o.Store.OldestQueued(ctx)
	if err != nil {
		p.fail(w, "oldest queued", err)
		return
	}
	if !oldest.IsZero() {
		st.Queue.OldestAgeSeconds = max(now.Sub(oldest).Seconds(), 0)
	}
	fails, err := p.o.Store.RecentFailures(ctx, maxFailures)
	if err != nil {
		p.fail(w, "recent failures", err)
		return
	}
	for _, f := range fails {
		st.Queue.Failures = append(st.Queue.Failures, Failure{ID: f.ID, Channel: f.Channel, Kind: f.Kind, Reason: f.Reason, At: f.At})
	}
	if p.o.Channels != nil {
		st.Channels = append(st.Channels, p.o.Channels()...)
	}
	if p.o.Credentials != nil {
		st.Credentials = append(st.Credentials, p.o.Credentials()...)
	}
	if p.o.Models != nil {
		st.Models = append(st.Models, p.o.Models()...)
	}
	if p.o.Plugins != nil {
		st.Plugins = append(st.Plugins, p.o.Plugins()...)
	}
	if p.o.Scripts != nil {
		st.Scripts = append(st.Scripts, p.o.Scripts()...)
	}
	if p.o.Cluster != nil {
		c, err := p.o.Cluster(ctx)
		if err != nil {
			p.fail(w, "replicas and leases", err)
			return
		}
		st.Cluster = &c
	}
	writeJSON(w, http.StatusOK, st)
}

func (p *Page) fail(w http.ResponseWriter, what string, err error) {
	p.log.Error("status page: read "+what, "err", err)
	writeJSON(w, http.StatusInternalServerError, apiError{"could not read " + what + " (see the OpenTalon log)"})
}

// Usage is the body of GET /api/usage: the ledger in time buckets, one
// series per model or channel.
type Usage struct {
	Range       string    `json:"range"`
	By          string    `json:"by"`
	StepSeconds int64     `json:"step_seconds"`
	From        time.Time `json:"from"`
	// Buckets are the start times of the buckets; every series has one
	// value per bucket.
	Buckets []time.Time `json:"buckets"`
	Series  []Series    `json:"series"`
}

// Series is one model's or channel's usage per bucket.
type Series struct {
	Key          string    `json:"key"`
	Calls        []int     `json:"calls"`
	InputTokens  []int64   `json:"input_tokens"`
	OutputTokens []int64   `json:"output_tokens"`
	CostUSD      []float64 `json:"cost_usd"`
}

// ranges are the windows of /api/usage and their bucket widths.
var ranges = map[string]struct {
	span, step time.Duration
}{
	"24h": {24 * time.Hour, time.Hour},
	"7d":  {7 * 24 * time.Hour, 6 * time.Hour},
	"30d": {30 * 24 * time.Hour, 24 * time.Hour},
}

func (p *Page) serveUsage(w http.ResponseWriter, r *http.Request) {
	rng, by := r.URL.Query().Get("range"), r.URL.Query().Get("by")
	if rng == "" {
		rng = "24h"
	}
	if by == "" {
		by = "model"
	}
	win, ok := ranges[rng]
	if !ok {
		writeJSON(w, http.StatusBadRequest, apiError{"range must be 24h, 7d or 30d"})
		return
	}
	if by != "model" && by != "channel" {
		writeJSON(w, http.StatusBadRequest, apiError{"by must be model or channel"})
		return
	}
	n := int(win.span / win.step)
	// The last bucket holds now; buckets start on whole steps (UTC).
	from := p.o.Now().UTC().Truncate(win.step).Add(-time.Duration(n-1) * win.step)
	pts, err := p.o.Store.UsageSeries(r.Context(), from, win.step, by)
	if err != nil {
		p.fail(w, "usage", err)
		return
	}
	u := Usage{Range: rng, By: by, StepSeconds: int64(win.step / time.Second), From: from, Buckets: make([]time.Time, n), Series: []Series{}}
	for i := range n {
		u.Buckets[i] = from.Add(time.Duration(i) * win.step)
	}
	idx := map[string]int{}
	for _, pt := range pts {
		b := int(pt.Bucket.Sub(from) / win.step)
		if b < 0 || b >= n {
			continue
		}
		key := pt.Key
		if key == "" {
			key = "(none)"
		}
		i, ok := idx[key]
		if !ok {
			i = len(u.Series)
			idx[key] = i
			u.Series = append(u.Series, Series{Key: key, Calls: make([]int, n), InputTokens: make([]int64, n), OutputTokens: make([]int64, n), CostUSD: make([]float64, n)})
		}
		s := &u.Series[i]
		s.Calls[b] += pt.Calls
		s.InputTokens[b] += pt.InputTokens
		s.OutputTokens[b] += pt.OutputTokens
		s.CostUSD[b] += pt.CostUSD
	}
	slices.SortFunc(u.Series, func(a, b Series) int { return strings.Compare(a.Key, b.Key) })
	writeJSON(w, http.StatusOK, u)
}

// Affinity is the body of GET /api/affinity: the learned score of each
// (task type, model) pair with the signals behind it.
type Affinity struct {
	Tasks  []string `json:"tasks"`
	Models []string `json:"models"`
	Cells  []Cell   `json:"cells"`
	// Choices are the router's choice per task type with its reasons.
	Choices []Choice `json:"choices"`
}

// Choice is the router's current choice for one task type and why it
// made it (acceptance and price, evidence, last change detected,
// exploring or settled), in the router's words.
type Choice struct {
	Task  string `json:"task"`
	Model string `json:"model"`
	State string `json:"state"`
	Why   string `json:"why"`
}

// Cell is one (task type, model) pair.
type Cell struct {
	Task      string  `json:"task"`
	Model     string  `json:"model"`
	Score     float64 `json:"score"`
	Evidence  float64 `json:"evidence"`
	Signals   int     `json:"signals"`
	Positives int     `json:"positives"`
	Negatives int     `json:"negatives"`
}

func (p *Page) serveAffinity(w http.ResponseWriter, r *http.Request) {
	rows, err := p.o.Store.Affinities(r.Context())
	if err != nil {
		p.fail(w, "affinity", err)
		return
	}
	now := p.o.Now()
	out := Affinity{Tasks: []string{}, Models: []string{}, Cells: []Cell{}, Choices: []Choice{}}
	if p.o.Choices != nil {
		out.Choices = append(out.Choices, p.o.Choices(r.Context())...)
	}
	for _, a := range rows {
		score, ev := p.o.Score(a, now)
		out.Cells = append(out.Cells, Cell{Task: a.Task, Model: a.Model, Score: score, Evidence: ev,
			Signals: a.Positives + a.Negatives, Positives: a.Positives, Negatives: a.Negatives})
		if !slices.Contains(out.Tasks, a.Task) {
			out.Tasks = append(out.Tasks, a.Task)
		}
		if !slices.Contains(out.Models, a.Model) {
			out.Models = append(out.Models, a.Model)
		}
	}
	slices.Sort(out.Tasks)
	slices.Sort(out.Models)
	writeJSON(w, http.StatusOK, out)
}
