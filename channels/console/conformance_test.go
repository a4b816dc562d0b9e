package console_test

import (
	"context"
	"io"
	"testing"

	"github.com/opentalon/opentalon/channels/channeltest"
	"github.com/opentalon/opentalon/channels/console"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// platform runs the console over a pipe: the test types into it.
type platform struct{}

type instance struct {
	ch *console.Channel
	in *io.PipeWriter
}

func (platform) Start(t *testing.T, _ []string) channeltest.Instance {
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	return &instance{ch: console.New(console.Options{In: r, Out: io.Discard}), in: w}
}

func (i *instance) Channel() core.Channel                    { return i.ch }
func (i *instance) Caps() channeltest.Caps                   { return channeltest.Caps{} }
func (i *instance) UserID(string) string                     { return "local" }
func (i *instance) Limit() int                               { return 0 }
func (i *instance) Redeliver(*testing.T, channeltest.Event)  {}
func (i *instance) Acked(*testing.T, channeltest.Event) bool { return true }
func (i *instance) React(*testing.T, string, string, string) {}

func (i *instance) Message(t *testing.T, _, text string) channeltest.Event {
	if _, err := io.WriteString(i.in, text+"\n"); err != nil {
		t.Fatal(err)
	}
	return text
}

func TestConformance(t *testing.T) {
	channeltest.Run(t, platform{}, channeltest.Options{OpenStore: func(t *testing.T) channeltest.Store {
		db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}})
}
