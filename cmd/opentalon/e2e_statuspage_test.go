package main

// The status page in a real headless Chromium (Debian's chromium package;
// .ci/run installs it), driven over the DevTools protocol with chromedp,
// against the whole App with the fake Telegram and the fake LLM.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/testenv"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// chromiumPath finds a Chromium binary: $OPENTALON_CHROMIUM, else
// chromium, chromium-browser or google-chrome on PATH; "" when none.
func chromiumPath() string {
	if p := os.Getenv("OPENTALON_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context; the browser ends with the test.
func browser(tb testing.TB) (context.Context, context.CancelFunc) {
	tb.Helper()
	path := chromiumPath()
	if path == "" {
		testenv.Missing(tb, "a Chromium binary (chromium on $PATH, or $OPENTALON_CHROMIUM)", "chromium")
	}
	// A fresh profile, removed after the browser is gone: its helper
	// processes may still write there for a moment after it exits.
	profile, err := os.MkdirTemp("", "opentalon-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		tb.Logf("could not remove the browser profile %s", profile)
	})
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI and containers
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1600),
	)
	ctx, cancelTab := chromedp.NewContext(ctx)
	cancel := func() { cancelTab(); cancelAlloc() }
	tb.Cleanup(cancel)
	return ctx, cancel
}

// consoleErrors collects what the page reports as errors: console.error
// calls, uncaught exceptions, and the browser's own error entries (a
// failed request, a refused CSP rule).
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

func (c *consoleErrors) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value))
				}
				msg = "console." + string(ev.Type) + ": " + strings.Join(parts, " ")
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				msg = "browser: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			c.mu.Lock()
			c.errs = append(c.errs, msg)
			c.mu.Unlock()
		}
	})
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// statusRig is the App on the fake Telegram with a few real requests
// answered and one judged, so the usage and the affinity have data.
type statusRig struct {
	h    *harness
	bot  *telegramtest.Server
	addr string
	clk  *clock.Fake
}

func startStatusRig(tb testing.TB) *statusRig {
	tb.Helper()
	llm := providertest.NewOpenAI(tb)
	bot := telegramtest.New(tb, tgToken)
	clk := clock.NewFake(time.Now())
	// Priced, so the cost chart has bars too.
	y := strings.Replace(telegramConfig(tb.TempDir(), llm.BaseURL(), bot.URL), "context_window: 8000 }", "context_window: 8000, cost: { input: 300, output: 1200 } }", 1)
	h := startAppWith(tb, loadConfigFile(tb, writeConfig(tb, y)), AppOptions{Now: clk.Now})
	addr := waitAddr(tb, h.app)
	alice := telegramtest.User(42, "alice")
	for i := range 3 {
		bot.AddUpdate(bot.Private(alice, fmt.Sprintf("question %d", i)))
	}
	sent := bot.WaitSent(tb, 3, 20*time.Second)
	bot.AddUpdate(telegramtest.Reaction(42, models.ChatTypePrivate, sent[0].MessageID, alice, nil, []string{"👍"}))
	deadline := time.Now().Add(20 * time.Second)
	for {
		aff, err := h.app.db.Affinities(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if len(aff) > 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("the 👍 reached no affinity row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &statusRig{h: h, bot: bot, addr: addr, clk: clk}
}

// screenshotPath is where the status page's screenshot is saved:
// $OPENTALON_STATUS_SCREENSHOT, else a file in the test's temp dir.
func screenshotPath(t *testing.T, name string) string {
	if p := os.Getenv("OPENTALON_STATUS_SCREENSHOT"); p != "" {
		return strings.TrimSuffix(p, ".png") + "-" + name + ".png"
	}
	return filepath.Join(t.TempDir(), name+".png")
}

func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	ctx, _ := browser(t)
	r := startStatusRig(t)
	var errs consoleErrors
	errs.listen(ctx)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	url := "http://" + r.addr + "/"

	var up, cells, costBars, tokenBars int
	var heat string
	var shot []byte
	err := chromedp.Run(ctx,
		runtime.Enable(),
		cdplog.Enable(),
		chromedp.Navigate(url),
		chromedp.WaitVisible(`body[data-loaded="true"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#channels tr[data-channel="telegram"][data-up="true"]').length`, &up),
		chromedp.Evaluate(`document.querySelectorAll('#heatmap rect[data-task][data-model="fake/small"]').length`, &cells),
		chromedp.Evaluate(`document.querySelector('#heatmap').textContent`, &heat),
		chromedp.Evaluate(`document.querySelectorAll('#cost-chart rect').length`, &costBars),
		chromedp.Evaluate(`document.querySelectorAll('#token-chart rect').length`, &tokenBars),
		chromedp.FullScreenshot(&shot, 100),
	)
	if err != nil {
		t.Fatalf("load %s: %v (console: %v)", url, err, errs.list())
	}
	p := screenshotPath(t, "status")
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(shot))
	if up != 1 {
		t.Errorf("telegram is not shown up (%d rows)", up)
	}
	// The 👍 and the follow-up questions (implicit acceptance) are signals.
	if cells != 1 || !strings.Contains(heat, "fake/small") || !strings.Contains(heat, "100% · ") || !strings.Contains(heat, " sig.") {
		t.Errorf("heat map: %d cells for fake/small, text %q; want the accepted model's cell with its signals", cells, heat)
	}
	if tokenBars < 1 || costBars < 1 {
		t.Errorf("usage charts: %d token bars, %d cost bars; want the 3 answers' tokens and cost", tokenBars, costBars)
	}

	// Per channel, 7 days: the same requests under the channel's name.
	var legend string
	if err := chromedp.Run(ctx,
		chromedp.Click(`#by button[data-v="channel"]`, chromedp.ByQuery),
		chromedp.Click(`#range button[data-v="7d"]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#legend').textContent.includes('telegram — 3 calls')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text(`#legend`, &legend, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("per-channel usage: %v (legend %q)", err, legend)
	}

	// The platform goes away: the page shows the channel down.
	r.bot.Stop()
	var down int
	deadline := time.Now().Add(30 * time.Second)
	for down == 0 && time.Now().Before(deadline) {
		r.clk.Advance(30 * time.Second) // past the channel's grace for a failing poll
		if err := chromedp.Run(ctx,
			chromedp.Reload(),
			chromedp.WaitVisible(`body[data-loaded="true"]`, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('#channels tr[data-channel="telegram"][data-up="false"]').length`, &down),
		); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if down != 1 {
		t.Fatal("the page never showed telegram down after its server stopped")
	}
	var reason string
	if err := chromedp.Run(ctx, chromedp.Text(`#channels tr[data-channel="telegram"]`, &reason, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "down") {
		t.Errorf("telegram's row says %q; want down with the reason", reason)
	}
	os.WriteFile(screenshotPath(t, "status-down"), shot, 0o644)
	if e := errs.list(); len(e) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(e, "\n"))
	}
}

// BenchmarkStatusPageFirstLoad is the status page's first load in
// headless Chromium with the cache off: from the start of the navigation
// until every section is drawn with data, as the page's own Performance
// API tells it (load-ms: HTML, CSS, script, the three API calls and the
// drawing), the same seen from the test over the DevTools protocol
// (wall-ms), and the bytes received on the wire (wire-bytes, gzip).
//
//	go test -run '^$' -bench StatusPageFirstLoad -benchtime 20x ./cmd/opentalon
func BenchmarkStatusPageFirstLoad(b *testing.B) {
	ctx, _ := browser(b)
	r := startStatusRig(b)
	var bytes, requests atomic.Int64
	chromedp.ListenTarget(ctx, func(ev any) {
		if ev, ok := ev.(*network.EventLoadingFinished); ok {
			bytes.Add(int64(ev.EncodedDataLength))
			requests.Add(1)
		}
	})
	url := "http://" + r.addr + "/"
	// One load to start the browser's processes.
	if err := chromedp.Run(ctx, network.Enable(), network.SetCacheDisabled(true), chromedp.Navigate(url),
		chromedp.WaitVisible(`body[data-loaded="true"]`, chromedp.ByQuery)); err != nil {
		b.Fatal(err)
	}
	var inPage float64
	var wall time.Duration
	n := 0
	bytes.Store(0)
	requests.Store(0)
	for b.Loop() {
		var drawn float64
		t0 := time.Now()
		if err := chromedp.Run(ctx,
			chromedp.Navigate(url),
			chromedp.WaitVisible(`body[data-loaded="true"]`, chromedp.ByQuery),
		); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		if err := chromedp.Run(ctx, chromedp.Evaluate(`performance.getEntriesByName('opentalon-drawn')[0].startTime`, &drawn)); err != nil {
			b.Fatal(err)
		}
		inPage += drawn
		n++
	}
	b.ReportMetric(inPage/float64(n), "load-ms")
	b.ReportMetric(float64(wall.Microseconds())/1000/float64(n), "wall-ms")
	b.ReportMetric(float64(bytes.Load())/float64(n), "wire-bytes")
	b.ReportMetric(float64(requests.Load())/float64(n), "requests")
}

// The JSON API the page reads, as documented in docs/status.md, is what
// other dashboards get too.
func TestStatusAPIShapes(t *testing.T) {
	t.Parallel()
	r := startStatusRig(t)
	get := func(path string, v any) {
		t.Helper()
		code, body := httpGet(t, "http://"+r.addr+path)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	var st struct {
		Channels []struct {
			Name string `json:"name"`
			Up   bool   `json:"up"`
		} `json:"channels"`
		Queue struct {
			Queued   int   `json:"queued"`
			Failures []any `json:"failures"`
		} `json:"queue"`
		Credentials []struct {
			Profile string `json:"profile"`
			Uses    int64  `json:"uses"`
		} `json:"credentials"`
	}
	get("/api/status", &st)
	if len(st.Channels) != 1 || st.Channels[0].Name != "telegram" || !st.Channels[0].Up || st.Queue.Failures == nil ||
		len(st.Credentials) != 1 || st.Credentials[0].Profile != "fake:default" || st.Credentials[0].Uses != 3 {
		t.Errorf("/api/status = %+v", st)
	}
	var u struct {
		StepSeconds int64       `json:"step_seconds"`
		Buckets     []time.Time `json:"buckets"`
		Series      []struct {
			Key   string `json:"key"`
			Calls []int  `json:"calls"`
		} `json:"series"`
	}
	get("/api/usage?range=30d&by=model", &u)
	if u.StepSeconds != 86400 || len(u.Buckets) != 30 || len(u.Series) != 1 || u.Series[0].Key != "fake/small" || u.Series[0].Calls[29] != 3 {
		t.Errorf("/api/usage = %+v", u)
	}
	if code, body := httpGet(t, "http://"+r.addr+"/api/usage?range=1y"); code != 400 || !strings.Contains(body, "24h, 7d or 30d") {
		t.Errorf("a bad range = %d %s", code, body)
	}
	var a struct {
		Tasks []string `json:"tasks"`
		Cells []struct {
			Model     string  `json:"model"`
			Score     float64 `json:"score"`
			Positives int     `json:"positives"`
		} `json:"cells"`
	}
	get("/api/affinity", &a)
	if len(a.Cells) != 1 || a.Cells[0].Model != "fake/small" || a.Cells[0].Positives < 1 || a.Cells[0].Score <= 0.5 {
		t.Errorf("/api/affinity = %+v", a)
	}
}

// TestStatusPageShowsProviderHealth: a provider whose every call fails is
// shown failing (its credential is not cooling, so it used to read
// "ready"), with the failures by kind, on the page and in /models; the
// cost axis is labelled in proportion; the console shows its last event.
func TestStatusPageShowsProviderHealth(t *testing.T) {
	ctx, _ := browser(t)
	llm := providertest.NewOpenAI(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/v1"
	down.Close() // nothing answers there
	y := fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    fake: { api: openai-completions, base_url: %q, api_key: k }
    down: { api: openai-completions, base_url: %q, api_key: k }
  catalog:
    fake/small: { alias: small, weight: 80, cost: { input: 300, output: 1200 } }
    down/big:   { alias: big, weight: 20 }
routing: { primary: fake/small }
queue: { max_attempts: 1, max_wait: 1s }
server: { listen: "127.0.0.1:0" }
`, t.TempDir(), llm.BaseURL(), downURL)
	h := startApp(t, loadConfigFile(t, writeConfig(t, y)))
	addr := waitAddr(t, h.app)
	h.send("hello")
	h.expect("echo: hello")
	h.send("/model big")
	h.next()
	h.send("are you there?")
	if got := h.next(); !strings.HasPrefix(got, "Sorry") {
		t.Fatalf("a question to the pinned model on a dead server: %q", got)
	}
	h.send("/models")
	var models []string
	for l := h.next(); ; l = h.next() {
		models = append(models, l)
		if strings.HasPrefix(l, "  down/big") && strings.Contains(l, "all failed") {
			break
		}
		if len(models) > 30 {
			t.Fatalf("/models does not show down/big failing:\n%s", strings.Join(models, "\n"))
		}
	}
	if last := models[len(models)-1]; !strings.Contains(last, "2 calls, all failed (unavailable ×2)") {
		t.Errorf("/models says %q; want the failure by kind", last)
	}

	var errs consoleErrors
	errs.listen(ctx)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var credState, credText, modelState, modelText, consoleLast string
	var ticks []string
	var heights []float64
	err := chromedp.Run(ctx,
		runtime.Enable(), cdplog.Enable(),
		chromedp.Navigate("http://"+addr+"/"),
		chromedp.WaitVisible(`body[data-loaded="true"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#credentials tr[data-profile="down:default"]').dataset.state`, &credState),
		chromedp.Evaluate(`document.querySelector('#credentials tr[data-profile="down:default"]').textContent`, &credText),
		chromedp.Evaluate(`document.querySelector('#models tr[data-model="down/big"]').dataset.state`, &modelState),
		chromedp.Evaluate(`document.querySelector('#models tr[data-model="down/big"]').textContent`, &modelText),
		chromedp.Evaluate(`document.querySelector('#channels tr[data-channel="console"] td:nth-child(3)').textContent`, &consoleLast),
		chromedp.Evaluate(`[...document.querySelectorAll('#cost-chart text.tick')].map((e) => e.textContent)`, &ticks),
		chromedp.Evaluate(`[...document.querySelectorAll('#cost-chart rect')].map((r) => +r.getAttribute('height'))`, &heights),
	)
	if err != nil {
		t.Fatalf("load the page: %v (console: %v)", err, errs.list())
	}
	if credState != "failing" || !strings.Contains(credText, "all failed (unavailable ×2)") {
		t.Errorf("down's credential reads %q (%s); want failing with the kind", credText, credState)
	}
	if modelState != "failing" || !strings.Contains(modelText, "unavailable ×2") {
		t.Errorf("down/big reads %q (%s); want failing, unavailable ×2 (the try and the one after its wait)", modelText, modelState)
	}
	if !strings.HasSuffix(consoleLast, " ago") {
		t.Errorf("the console's last event reads %q; want how long ago", consoleLast)
	}
	// Three labels 0, s, 2s: each in proportion to the height it marks.
	if len(ticks) != 3 || ticks[0] != "$0" {
		t.Fatalf("cost axis labels %q; want $0 and two more", ticks)
	}
	var v [3]float64
	for i, tk := range ticks[1:] {
		if _, err := fmt.Sscanf(tk, "$%g", &v[i+1]); err != nil {
			t.Fatalf("cost axis label %q: %v", tk, err)
		}
	}
	if v[1] <= 0 || v[2] != 2*v[1] {
		t.Errorf("cost axis labels %q are not proportional (0, x, 2x)", ticks)
	}
	cost := 0.0
	if rows, err := h.app.db.UsageTotals(context.Background(), time.Now().Add(-time.Hour), "model", ""); err == nil {
		for _, r := range rows {
			cost += r.CostUSD
		}
	}
	if cost <= 0 || cost > v[2] || cost <= v[2]/4 {
		t.Errorf("cost axis top %g for a spend of %g; want the top just above it", v[2], cost)
	}
	t.Logf("cost axis %q for a spend of %g", ticks, cost)
	if len(heights) != 1 {
		t.Errorf("cost bars %v; want one", heights)
	}
	if e := errs.list(); len(e) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(e, "\n"))
	}
}
