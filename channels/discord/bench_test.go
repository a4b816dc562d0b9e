package discord_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// BenchmarkMessageToReply measures MESSAGE_CREATE → REST reply through
// the whole path: the fake gateway's websocket, discordgo, the channel,
// the gateway's SQLite queue (4 workers, the default), an instant agent,
// and the reply POSTed to the fake's REST API (with the default typing
// indicator and ack reaction). One iteration is 1,000 mentions from 50
// guild channels, each channel sending its next message as soon as its
// previous reply arrived. Reported: p50 and p99 of the time from the
// dispatch to the reply's arrival, and messages per second. The
// one_channel case (100 messages, one at a time) is the latency of a
// message without others queued beside it.
func BenchmarkMessageToReply(b *testing.B) {
	b.Run("50_channels", func(b *testing.B) { benchReplies(b, 50, 20) })
	b.Run("one_channel", func(b *testing.B) { benchReplies(b, 1, 100) })
}

func benchReplies(b *testing.B, channels, perChannel int) {
	srv := discordtest.New(b, token)
	cfg := config.Default().Channels.Discord
	cfg.Enabled, cfg.Token, cfg.APIURL = true, config.Secret(srv.Token), srv.URL
	bot, err := discord.New(discord.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Store: db, Agent: &echoAgent{}, Workers: 4})
	gw.AddChannel(bot)
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx, 5*time.Second) }()
	defer func() {
		cancel()
		<-done
		bot.Close()
		db.Close()
	}()

	type arrival struct {
		replyTo string
		at      time.Time
	}
	arrived := make(chan arrival, channels*perChannel)
	srv.OnSent(func(s discordtest.Sent) { arrived <- arrival{s.ReplyTo, s.At} })
	guild := srv.Guild()
	chans := make([]string, channels)
	for i := range chans {
		chans[i] = srv.TextChannel(guild)
	}
	user := srv.User("alice")
	mention := discordtest.Mention(srv.Bot) + " how are you?"
	var lat []time.Duration
	var elapsed time.Duration
	for b.Loop() {
		sentAt := map[string]time.Time{}
		chanOf := map[string]int{}
		left := make([]int, channels)
		post := func(c int) {
			left[c]--
			at := time.Now()
			id := srv.Message(b, discordtest.Msg{Channel: chans[c], Guild: guild, Author: user, Content: mention, Mentions: []discordtest.User{srv.Bot}})
			sentAt[id], chanOf[id] = at, c
		}
		start := time.Now()
		for c := range channels {
			left[c] = perChannel
			post(c)
		}
		for got := 0; got < channels*perChannel; {
			var a arrival
			select {
			case a = <-arrived:
			case <-time.After(30 * time.Second):
				b.Fatalf("%d of %d replies after 30s", got, channels*perChannel)
			}
			at, ok := sentAt[a.replyTo]
			if !ok {
				continue
			}
			got++
			lat = append(lat, a.at.Sub(at))
			if c := chanOf[a.replyTo]; left[c] > 0 {
				post(c)
			}
		}
		elapsed += time.Since(start)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op")
}
