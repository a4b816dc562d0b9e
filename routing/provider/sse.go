package provider

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxSSELine bounds one line of a server-sent event stream; a longer line
// is treated as a malformed stream rather than read into memory.
const maxSSELine = 4 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	Event string // "" when the server named none
	Data  string // data lines joined with "\n"
}

// sseReader reads server-sent events (the text/event-stream format), at
// most maxBody bytes of them: a stream is an answer, bounded like a
// complete one.
type sseReader struct {
	r     *bufio.Reader
	count *countingReader
	limit int64
}

// newSSEReader reads the event stream of r. Its buffer is bufio's
// default 4 KB: the HTTP transport hands the body over in reads of at
// most that, and readLine joins the pieces of a longer line (a larger
// buffer was 28 KB more garbage per call).
func newSSEReader(r io.Reader) *sseReader {
	c := &countingReader{r: r}
	return &sseReader{r: bufio.NewReader(c), count: c, limit: maxBody}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// errLineTooLong marks a stream line over maxSSELine, errStreamTooLong a
// stream over maxBody.
var (
	errLineTooLong   = errors.New("event stream line too long")
	errStreamTooLong = fmt.Errorf("answer larger than %d bytes", maxBody)
)

// tooLong reports an error of a stream that broke a size bound.
func tooLong(err error) bool {
	return errors.Is(err, errLineTooLong) || errors.Is(err, errStreamTooLong)
}

// readLine returns one line without its line ending.
func (s *sseReader) readLine() (string, error) {
	var b []byte
	for {
		if s.count.n > s.limit {
			return "", errStreamTooLong
		}
		frag, isPrefix, err := s.r.ReadLine()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return string(b), nil
			}
			return "", err
		}
		if b == nil && !isPrefix {
			// A whole line in the buffer (the usual case): one copy.
			return string(frag), nil
		}
		b = append(b, frag...)
		if len(b) > maxSSELine {
			return "", errLineTooLong
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

// Next returns the next event with data, skipping comments and events
// without data. It returns io.EOF at a clean end of the stream (a partly
// read event at EOF is dispatched first).
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	hasData := false
	for {
		line, err := s.readLine()
		if err == io.EOF {
			if hasData {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			return sseEvent{}, io.EOF
		}
		if err != nil {
			return sseEvent{}, fmt.Errorf("reading event stream: %w", err)
		}
		if line == "" {
			if hasData {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
			hasData = true
		}
	}
}

// chunkReader reads an event stream's events as the chunks of an answer.
// A server that ends each data line with one newline instead of a blank
// line sends what the format joins into one event of several lines, each
// a whole chunk: such data (several lines that are not one JSON value)
// is read one line at a time, blank lines skipped. Data that is one JSON
// value over several lines is one chunk.
type chunkReader struct {
	sse     *sseReader
	pending []string
}

func newChunkReader(r io.Reader) *chunkReader { return &chunkReader{sse: newSSEReader(r)} }

// Next returns the next chunk; io.EOF at the end of the stream.
func (c *chunkReader) Next() (sseEvent, error) {
	for {
		for len(c.pending) > 0 {
			line := c.pending[0]
			c.pending = c.pending[1:]
			if strings.TrimSpace(line) != "" {
				return sseEvent{Data: line}, nil
			}
		}
		ev, err := c.sse.Next()
		if err != nil || !strings.Contains(ev.Data, "\n") || json.Valid([]byte(ev.Data)) {
			return ev, err
		}
		c.pending = strings.Split(ev.Data, "\n")
	}
}
