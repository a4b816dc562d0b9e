package core

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"
)

func TestErrorf(t *testing.T) {
	err := Errorf(KindInvalid, "open %s: %w", "x.yaml", fs.ErrNotExist)
	if got := err.Error(); got != "open x.yaml: file does not exist" {
		t.Fatalf("Error() = %q; the cause must appear once", got)
	}
	if !errors.Is(err, fs.ErrNotExist) || ErrorKind(err) != KindInvalid {
		t.Fatalf("Errorf lost its cause or kind: %v", err)
	}
	two := Errorf(KindUnavailable, "%w and %w", fs.ErrNotExist, fs.ErrPermission)
	if !errors.Is(two, fs.ErrPermission) || !errors.Is(two, fs.ErrNotExist) {
		t.Fatal("a second %w cause was lost")
	}
}

func TestKindsAndRetry(t *testing.T) {
	rl := &Error{Kind: KindRateLimited, Msg: "slow down", RetryAfter: 3 * time.Second}
	wrapped := errors.Join(errors.New("ctx"), rl)
	if ErrorKind(wrapped) != KindRateLimited || RetryAfter(wrapped) != 3*time.Second || !Transient(wrapped) {
		t.Fatalf("kind/retry-after not found through wrapping: %v", wrapped)
	}
	for _, k := range []Kind{KindAuth, KindBilling, KindBadRequest, KindContextTooLong, KindMalformed, KindInvalid} {
		if Transient(&Error{Kind: k}) || Passing(&Error{Kind: k}) {
			t.Errorf("%s must not be retried on the same request", k)
		}
	}
	// An error of no known kind may be tried again, but it is not known
	// to pass.
	if unknown := errors.New("?"); !Transient(unknown) || Passing(unknown) {
		t.Error("an unknown failure is transient, and not known to pass")
	}
	for _, k := range []Kind{KindRateLimited, KindUnavailable, KindTimeout} {
		if !Passing(&Error{Kind: k}) || !Transient(&Error{Kind: k}) {
			t.Errorf("%s passes", k)
		}
	}
	if (&Error{Kind: KindAuth, Msg: "refused", Err: errors.New("401")}).Error() != "refused: 401" {
		t.Fatal("Msg and a distinct cause are both shown")
	}
}

// TestRefusal: what a channel stops on for good is a refused credential
// or a config that cannot work, wrapped or not; nothing else, nil neither.
func TestRefusal(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&Error{Kind: KindAuth, Msg: "token revoked"}, true},
		{fmt.Errorf("channel x: %w", &Error{Kind: KindInvalid, Msg: "bad mode"}), true},
		{&Error{Kind: KindUnavailable, Msg: "502"}, false},
		{&Error{Kind: KindRateLimited, Msg: "slow down"}, false},
		{errors.New("plain"), false},
		{nil, false},
	} {
		if got := Refusal(tt.err); got != tt.want {
			t.Errorf("Refusal(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"wieght", "weight", 2}, {"kitten", "sitting", 3},
		{"naïve", "naive", 1}, // one rune, not two bytes
	} {
		if got := EditDistance(c.a, c.b); got != c.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
