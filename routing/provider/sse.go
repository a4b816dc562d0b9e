package provider

import (
	"bufio"
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

// sseReader reads server-sent events (the text/event-stream format).
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// errLineTooLong marks a stream line over maxSSELine.
var errLineTooLong = errors.New("event stream line too long")

// readLine returns one line without its line ending.
func (s *sseReader) readLine() (string, error) {
	var b []byte
	for {
		frag, isPrefix, err := s.r.ReadLine()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return string(b), nil
			}
			return "", err
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
