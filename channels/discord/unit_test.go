package discord

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

func TestAPIRoot(t *testing.T) {
	for in, want := range map[string]string{
		"https://discord.com":               "https://discord.com",
		"https://discord.com/":              "https://discord.com",
		"https://discord.com/api/v10":       "https://discord.com",
		"https://discord.com/api/v9/":       "https://discord.com",
		"https://discord.com/api":           "https://discord.com",
		"http://127.0.0.1:8080":             "http://127.0.0.1:8080",
		"https://proxy.example/discord":     "https://proxy.example/discord",
		"https://proxy.example/discord/api": "https://proxy.example/discord",
	} {
		u, err := apiRoot(in)
		if err != nil || u.String() != want {
			t.Errorf("apiRoot(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, bad := range []string{"", "discord.com", "ftp://discord.com", "https://", "https://x/?q=1"} {
		if _, err := apiRoot(bad); core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "channels.discord.api_url") {
			t.Errorf("apiRoot(%q) = %v, want an error naming channels.discord.api_url", bad, err)
		}
	}
}

func TestRewriteSendsDiscordRequestsToTheRoot(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.Host+" "+r.URL.EscapedPath())
		io.WriteString(w, `{"url":"ws://example/gateway"}`)
	}))
	defer srv.Close()
	root, err := apiRoot(srv.URL + "/prefix/api/v10")
	if err != nil {
		t.Fatal(err)
	}
	c := newHTTPClient(root, nil)
	s, _ := discordgo.New("Bot x")
	s.Client = c
	s.LogLevel = discordgo.LogError - 1
	if _, err := s.Gateway(); err != nil {
		t.Fatal(err)
	}
	if err := s.MessageReactionAdd("1", "2", "👀"); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	want := []string{"GET " + host + " /prefix/api/v9/gateway", "PUT " + host + " /prefix/api/v9/channels/1/messages/2/reactions/%F0%9F%91%80/@me"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A discovery answer naming Discord's own gateway points at the root.
	real := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"url":"wss://gateway.discord.gg","shards":1}`)
	}))
	defer real.Close()
	for api, want := range map[string]string{real.URL: "ws://" + strings.TrimPrefix(real.URL, "http://") + "/", real.URL + "/p": "ws://" + strings.TrimPrefix(real.URL, "http://") + "/p/"} {
		root, _ := apiRoot(api)
		s.Client = newHTTPClient(root, nil)
		if gw, err := s.Gateway(); err != nil || gw != want {
			t.Errorf("api_url %s: gateway %q, %v; want %q", api, gw, err, want)
		}
		if gb, err := s.GatewayBot(); err != nil || gb.URL != want || gb.Shards != 1 {
			t.Errorf("api_url %s: gateway/bot %+v, %v; want %q", api, gb, err, want)
		}
	}
	s.Client = c
	// Other hosts pass unchanged.
	req, _ := http.NewRequest("GET", srv.URL+"/other", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got[len(got)-1] != "GET "+host+" /other" {
		t.Errorf("a request to another host went to %s", got[len(got)-1])
	}
}

func TestStripMention(t *testing.T) {
	tests := []struct {
		in, want string
		found    bool
	}{
		{"<@42> hello", "hello", true},
		{"<@!42>, what now?", "what now?", true},
		{"hey <@42> there", "hey there", true},
		{"<@42>", "", true},
		{"<@421> not me", "<@421> not me", false},
		{"line one\n<@42> line two", "line one\nline two", true},
		{"<@42> fix:\n  a\n\tb  c", "fix:\n  a\n\tb  c", true},
		{"look, <@42>: \n  x", "look,\n  x", true},
	}
	for _, tt := range tests {
		got, found := stripMention(tt.in, "42")
		if got != tt.want || found != tt.found {
			t.Errorf("stripMention(%q) = %q, %v; want %q, %v", tt.in, got, found, tt.want, tt.found)
		}
	}
	if got := nameMention("ask <@7> and <@!7>", &discordgo.User{ID: "7", Username: "bob"}); got != "ask @bob and @bob" {
		t.Errorf("nameMention = %q", got)
	}
}

func TestAppCommandsAndComparison(t *testing.T) {
	cmds := appCommands([]core.CommandInfo{
		{Name: "model", Usage: "/model [name|alias|auto|@profile]", Description: "Show or pin the model"},
		{Name: "new", Usage: "/new", Description: ""},
		{Name: "model", Usage: "/model", Description: "a duplicate"},
		{Name: "bad name", Usage: "/bad"},
		{Name: "long", Usage: "/long", Description: strings.Repeat("x", 150)},
	})
	if len(cmds) != 3 {
		t.Fatalf("commands = %d, want model, new, long", len(cmds))
	}
	m, n, l := cmds[0], cmds[1], cmds[2]
	if m.Name != "model" || len(m.Options) != 1 || m.Options[0].Name != "model" || m.Options[0].Description != "name|alias|auto|@profile" || m.Options[0].Required {
		t.Errorf("/model = %+v %+v", m, m.Options)
	}
	if n.Description != "/new" || len(n.Options) != 0 {
		t.Errorf("/new = %+v, want the usage as description and no option", n)
	}
	if len([]rune(l.Description)) != 100 {
		t.Errorf("a 150-character description became %d characters", len([]rune(l.Description)))
	}
	same := *m
	same.ID, same.Version = "1", "2"
	if !sameCommand(&same, m) {
		t.Error("a command differing only in Discord's ids is not the same")
	}
	other := *m
	other.Options = []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "model", Description: "changed"}}
	if sameCommand(&other, m) {
		t.Error("a changed option description is the same command")
	}
}

func TestFormat(t *testing.T) {
	b := &Bot{}
	if got := b.Format(""); len(got) != 1 || got[0] != "(empty answer)" {
		t.Errorf("Format(\"\") = %q", got)
	}
	if got := b.Format("**hi** @here"); len(got) != 1 || got[0] != "**hi** @\u200bhere" {
		t.Errorf("Format = %q", got)
	}
}

func TestOneAckReactionPerChannelAtATime(t *testing.T) {
	b := &Bot{reacting: map[string]bool{}}
	if !b.claimReactions("c1") || b.claimReactions("c1") || !b.claimReactions("c2") {
		t.Fatal("a channel's first claim must succeed, its second fail, another channel's succeed")
	}
	b.releaseReactions("c1")
	if !b.claimReactions("c1") {
		t.Error("a released channel cannot be claimed again")
	}
}

// TestFirstTimeForgetsAnAnswerThatNeverEnded: firstTime remembers what a
// private answer's parts did until its last part, and a key whose last
// part never comes (its request failed for good) is dropped after
// toldFor rather than kept until the process ends.
func TestFirstTimeForgetsAnAnswerThatNeverEnded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cfg := config.Default().Channels.Discord
	cfg.Enabled, cfg.Token = true, config.Secret("test-token")
	b, err := New(Options{Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if !b.firstTime("1 lead", false) || b.firstTime("1 lead", false) {
		t.Fatal("the first part of an answer must lead, the second not")
	}
	if b.firstTime("1 lead", true) || !b.firstTime("1 lead", false) {
		t.Fatal("the last part forgets the key: a new answer leads again")
	}
	b.firstTime("2 notice", false) // its answer never ends
	now = now.Add(toldFor + time.Second)
	b.firstTime("3 lead", true)
	b.mu.Lock()
	left := len(b.told)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d keys left after %s; want those of answers that never ended forgotten", left, toldFor)
	}
}
