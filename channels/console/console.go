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

// DefaultChat is the console conversation's chat.
const DefaultChat = "local"

// Options configure a console channel.
type Options struct {
	In  io.Reader
	Out io.Writer
	// Chat names the console conversation (default DefaultChat).
	Chat string
	// Thread, on a database several replicas share, is this replica's
	// name: each terminal has its own conversation (console:local:<name>),
	// which only its replica answers. "" with one process (console:local).
	Thread string
	// User is the user id messages are attributed to (default "local").
	User string
	// OnEOF is called once the input ends (a pipe closed, Ctrl-D).
	OnEOF func()
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Interactive is set when In and Out are a terminal: a prompt shows
	// where to type, and a line counts the seconds while an answer is
	// being written. Pipes (scripts, tests) get the answers only.
	Interactive bool
	// Tick is how often the waiting line is redrawn (default 1s).
	Tick time.Duration
	// TerminalIn is set when In is a terminal, whatever Out is (opentalon
	// run | tee FILE, or the console beside a chat platform): its line
	// mode cuts a line at terminalLineMax bytes, so such a line is not
	// sent (lineCutNotice). Interactive implies it.
	TerminalIn bool
	// TerminalOut is set when Out is a terminal, whatever In is (echo
	// question | opentalon run): what a terminal would act on in an
	// answer is written as escapes (shown). Through a pipe (a script, a
	// file) the answer is written as it is. Interactive implies it.
	TerminalOut bool
}

// Prompts of an interactive console: for a new message, and for the
// next line of a message continued with a backslash.
const (
	Prompt         = "› "
	PromptContinue = "· "
)

// terminalLineMax is the longest line a terminal in its line mode
// passes on, in bytes (Linux's n_tty: 4096 with the newline): the kernel
// drops the rest of a longer line, typed or pasted, without a word. On a
// terminal a line that long is taken as cut and not sent (lineCutNotice).
const terminalLineMax = 4095

// lineCutNotice tells the person at the terminal that their message was
// not sent, why, and what to do instead.
const lineCutNotice = "not sent: the terminal cuts a line at 4095 characters, so the message was not all read; " +
	`split it into lines ending in \ (they make one message), or ask once with opentalon complete "$(cat FILE)"`

// thinking is the waiting line's text; the seconds follow it.
const thinking = "  thinking… "

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// Channel is the console adapter.
type Channel struct {
	o     Options
	mu    sync.Mutex // serializes writes to Out and guards the screen state below
	sent  int64
	start string
	// What the last line of the terminal shows (Interactive only): the
	// prompt, or the waiting line; the cursor is at its end.
	prompt  string
	waiting bool
	// last is when the last line was read.
	last time.Time
	// stopped is set once the gateway stops (Ctrl-C) or the input ends
	// (Ctrl-D): no prompt shows again, as no line is read any more.
	stopped bool
}

var (
	_ core.Channel   = (*Channel)(nil)
	_ core.Indicator = (*Channel)(nil)
)

// LastEvent is when the last line was read, for the status page. (The
// console is no core.HealthReporter: it is always up, and /status on the
// console need not say that its user just typed.)
func (c *Channel) LastEvent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// New builds a console channel; it reads nothing until Run.
func New(o Options) *Channel {
	if o.Chat == "" {
		o.Chat = DefaultChat
	}
	if o.User == "" {
		o.User = "local"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
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
	c.showPrompt(Prompt)
	go func() {
		defer close(lines)
		rd := bufio.NewReader(c.o.In)
		var pending strings.Builder
		cut := false // a line of pending reached terminalLineMax
		cuts := c.o.Interactive || c.o.TerminalIn
		for {
			line, err := rd.ReadString('\n')
			if err == nil {
				c.typed()
			}
			if line == "" && err != nil {
				return // the input ended (or failed: nothing more to read)
			}
			line = strings.TrimRight(line, "\r\n")
			if cuts && len(line) >= terminalLineMax {
				// The terminal dropped what came past its limit: the
				// message is not what was typed, and an answer to its
				// first part would look like an answer to the whole.
				cut = true
			}
			if strings.HasSuffix(line, `\`) {
				pending.WriteString(strings.TrimSuffix(line, `\`) + "\n")
				c.showPrompt(PromptContinue)
				continue
			}
			pending.WriteString(line)
			text := pending.String()
			pending.Reset()
			if cut {
				cut = false
				c.write(lineCutNotice)
				c.showPrompt(Prompt)
				continue
			}
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
			c.stopping()
			return nil
		case text, ok := <-lines:
			if !ok {
				c.endPrompt()
				if c.o.OnEOF != nil {
					c.o.OnEOF()
				}
				<-ctx.Done()
				return nil
			}
			c.mu.Lock()
			c.last = c.o.Now()
			c.mu.Unlock()
			if strings.TrimSpace(text) == "" {
				c.showPrompt(Prompt)
				continue
			}
			seq++
			in := core.Inbound{
				Conversation: core.ConversationKey{Channel: Name, Chat: c.o.Chat, Thread: c.o.Thread},
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

// Uncapped implements core.Uncapped: the console's lines are its
// operator's, and a file piped in is queued whole, not refused past
// queue.max_pending.
func (c *Channel) Uncapped() bool { return true }

// Close implements core.Channel; the console holds nothing to release.
func (c *Channel) Close() error { return nil }

// Format implements core.Channel: a terminal takes the text as it is.
func (c *Channel) Format(text string) []string { return []string{text} }

// Send implements core.Channel: the part is written followed by a
// newline; on a terminal, what it would act on is written as escapes
// (shown).
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
	if c.o.Interactive || c.o.TerminalOut {
		s = shown(s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A message takes the place of the prompt or the waiting line; a
	// prompt shows again below it.
	prompt := c.prompt
	if prompt != "" || c.waiting {
		s = clearLine + s
		c.waiting = false
	}
	_, err := io.WriteString(c.o.Out, s+"\n"+prompt)
	return err
}

// stopping tells the person at the terminal that the gateway is
// stopping (Ctrl-C, SIGTERM) and no longer reads what they type: it
// finishes the answers being written first, which may take a while, and
// without a word the terminal looked as if it still listened (the
// seconds went on counting, a line typed was echoed and then lost). No
// prompt shows again. Through pipes nothing is written.
func (c *Channel) stopping() {
	if !c.o.Interactive {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	// The terminal echoed ^C where the cursor was: the prompt's line or
	// the waiting line; the notice takes its place.
	io.WriteString(c.o.Out, clearLine+stoppingNotice+"\n")
	c.prompt, c.waiting = "", false
}

// stoppingNotice is the line stopping writes.
const stoppingNotice = "stopping: answers being written are finished first; Ctrl-C again quits at once (next time, /stop ends an answer and keeps OpenTalon running)"

// endPrompt ends the prompt's line when the input ends (Ctrl-D); no
// prompt shows again, as no line is read any more: the answers still
// being written end the terminal's output, on a line of their own.
func (c *Channel) endPrompt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.prompt != "" {
		io.WriteString(c.o.Out, "\n")
		c.prompt = ""
	}
}

// showPrompt shows p where the next line is typed (Interactive only).
func (c *Channel) showPrompt(p string) {
	if !c.o.Interactive {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prompt == p || c.stopped {
		return
	}
	pre := ""
	if c.prompt != "" || c.waiting {
		pre = clearLine
	}
	io.WriteString(c.o.Out, pre+p)
	c.prompt, c.waiting = p, false
}

// typed notes that a line was entered: the terminal's echo moved the
// cursor to a new line, below the prompt.
func (c *Channel) typed() {
	c.mu.Lock()
	c.prompt = ""
	c.mu.Unlock()
}

// Working implements core.Indicator: on a terminal, a line counts the
// seconds until the answer replaces it; then the prompt comes back.
func (c *Channel) Working(ctx context.Context, _ core.Inbound) (stop func()) {
	if !c.o.Interactive {
		return func() {}
	}
	started := c.o.Now()
	shown := ""
	draw := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.prompt != "" && c.prompt != Prompt {
			return // a continued message is being typed
		}
		line := thinking + strconv.Itoa(int(c.o.Now().Sub(started).Seconds())) + "s"
		if c.waiting && line == shown {
			return
		}
		io.WriteString(c.o.Out, clearLine+line)
		c.prompt, c.waiting, shown = "", true, line
	}
	draw()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(c.o.Tick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				draw()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			c.mu.Lock()
			if c.waiting {
				io.WriteString(c.o.Out, clearLine)
				c.waiting = false
			}
			c.mu.Unlock()
			c.showPrompt(Prompt)
		})
	}
}
