package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Name is the channel id.
const Name = "console"

// Options configure a console channel.
type Options struct {
	In  io.Reader
	Out io.Writer
	// Chat names the console conversation (default "local").
	Chat string
	// User is the user id messages are attributed to (default "local").
	User string
	// OnEOF is called once the input ends (a pipe closed, Ctrl-D).
	OnEOF func()
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Channel is the console adapter.
type Channel struct {
	o     Options
	mu    sync.Mutex // serializes writes to Out
	sent  int64
	start string
}

var _ core.Channel = (*Channel)(nil)

// New builds a console channel; it reads nothing until Run.
func New(o Options) *Channel {
	if o.Chat == "" {
		o.Chat = "local"
	}
	if o.User == "" {
		o.User = "local"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// Message ids must stay unique across restarts of the same database:
	// the start time makes them so.
	return &Channel{o: o, start: strconv.FormatInt(o.Now().UnixNano(), 36)}
}

// Name implements core.Channel.
func (c *Channel) Name() string { return Name }

// Run implements core.Channel: it reads lines until the input ends or ctx
// is done. Blank lines are skipped; a line ending in a backslash joins the
// next one, so multi-line messages can be typed.
func (c *Channel) Run(ctx context.Context, sink core.Sink) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		rd := bufio.NewReader(c.o.In)
		var pending strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if line == "" && err != nil {
				return // the input ended (or failed: nothing more to read)
			}
			line = strings.TrimRight(line, "\r\n")
			if strings.HasSuffix(line, `\`) {
				pending.WriteString(strings.TrimSuffix(line, `\`) + "\n")
				continue
			}
			pending.WriteString(line)
			text := pending.String()
			pending.Reset()
			select {
			case lines <- text:
			case <-ctx.Done():
				return
			}
		}
	}()
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case text, ok := <-lines:
			if !ok {
				if c.o.OnEOF != nil {
					c.o.OnEOF()
				}
				<-ctx.Done()
				return nil
			}
			if strings.TrimSpace(text) == "" {
				continue
			}
			seq++
			in := core.Inbound{
				Conversation: core.ConversationKey{Channel: Name, Chat: c.o.Chat},
				MessageID:    c.start + "-" + strconv.Itoa(seq),
				UserID:       c.o.User,
				UserName:     c.o.User,
				Text:         strings.TrimSpace(text),
				Mentioned:    true,
				Private:      true,
				ReceivedAt:   c.o.Now(),
			}
			if err := sink.Accept(ctx, in); err != nil {
				c.write(fmt.Sprintf("error: message not accepted: %v", err))
			}
		}
	}
}

// Close implements core.Channel; the console holds nothing to release.
func (c *Channel) Close() error { return nil }

// Format implements core.Channel: a terminal takes the text as it is.
func (c *Channel) Format(text string) []string { return []string{text} }

// Send implements core.Channel: the part is written followed by a newline.
func (c *Channel) Send(_ context.Context, _ core.Outbound, part string) (string, error) {
	if err := c.write(part); err != nil {
		return "", fmt.Errorf("console: write reply: %w", err)
	}
	c.mu.Lock()
	c.sent++
	id := c.start + "-r" + strconv.FormatInt(c.sent, 10)
	c.mu.Unlock()
	return id, nil
}

func (c *Channel) write(s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.o.Out, s+"\n")
	return err
}
