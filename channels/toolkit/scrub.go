package toolkit

import "strings"

// Scrubber removes secrets (bot and app tokens) from error texts before
// they are logged or returned: HTTP libraries put request URLs, and so a
// token in the path, into their errors.
type Scrubber struct {
	secrets []string
}

// NewScrubber scrubs the given secrets; empty ones are ignored.
func NewScrubber(secrets ...string) Scrubber {
	var s Scrubber
	for _, x := range secrets {
		if x != "" {
			s.secrets = append(s.secrets, x)
		}
	}
	return s
}

// String returns s with every secret replaced by "<token>".
func (s Scrubber) String(str string) string {
	for _, x := range s.secrets {
		str = strings.ReplaceAll(str, x, "<token>")
	}
	return str
}

// Error returns err with its text scrubbed; errors.Is and errors.As still
// see the cause. It returns err itself when there is nothing to hide.
func (s Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &scrubbed{err: err, msg: clean}
	}
	return err
}

type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
