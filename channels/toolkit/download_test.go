package toolkit

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestFetchStaysOnTheFileHost(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other host was asked for %s (auth %q)", r.URL.Path, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	var served int64
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/file":
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, "no", http.StatusForbidden)
				return
			}
			w.Write([]byte("hello"))
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
		case "/big":
			w.Header().Set("Content-Length", "5000")
			n, _ := w.Write(bytes.Repeat([]byte("x"), 5000))
			served += int64(n)
		case "/chunked":
			// No Content-Length: the limit stops the read.
			for i := 0; i < 10; i++ {
				w.Write(bytes.Repeat([]byte("y"), 1000))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer host.Close()
	hosts := []string{HostOf(host.URL)}
	auth := http.Header{"Authorization": {"Bearer tok"}}
	ctx := context.Background()

	var b bytes.Buffer
	if err := Fetch(ctx, Download{URL: host.URL + "/file", Hosts: hosts, Header: auth}, &b, 100); err != nil || b.String() != "hello" {
		t.Fatalf("Fetch = %q, %v", b.String(), err)
	}
	if err := Fetch(ctx, Download{URL: other.URL + "/file", Hosts: hosts, Header: auth}, &b, 100); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("a URL on another host: %v; want refused", err)
	}
	err := Fetch(ctx, Download{URL: host.URL + "/away", Hosts: hosts, Header: auth}, &b, 100)
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("a redirect to another host: %v; want refused", err)
	}
	b.Reset()
	if err := Fetch(ctx, Download{URL: host.URL + "/big", Hosts: hosts}, &b, 1000); !errors.Is(err, core.ErrTooLarge) || b.Len() != 0 {
		t.Fatalf("a declared 5000 bytes with a limit of 1000: %v, %d bytes written; want ErrTooLarge before reading", err, b.Len())
	}
	b.Reset()
	if err := Fetch(ctx, Download{URL: host.URL + "/chunked", Hosts: hosts}, &b, 2500); !errors.Is(err, core.ErrTooLarge) || b.Len() > 2501 {
		t.Fatalf("an undeclared 10000 bytes with a limit of 2500: %v, %d bytes written; want ErrTooLarge at the limit", err, b.Len())
	}
	u, _ := url.Parse(host.URL)
	if err := Fetch(ctx, Download{URL: "ftp://" + u.Host + "/file", Hosts: hosts}, &b, 100); err == nil {
		t.Fatal("an ftp URL was fetched")
	}
}

func TestStreamPolicy(t *testing.T) {
	cases := []struct {
		mode   string
		native bool
		want   core.StreamMode
	}{
		{"", true, core.StreamEdit}, {"edit", true, core.StreamEdit}, {"off", true, core.StreamOff},
		{"native", true, core.StreamNative}, {"native", false, core.StreamEdit}, {"bogus", true, core.StreamOff},
	}
	for _, c := range cases {
		if p := StreamPolicy(c.mode, c.native, 1); p.Mode != c.want || p.FirstDelay != FirstDelay {
			t.Errorf("StreamPolicy(%q, %v) = %+v; want mode %s", c.mode, c.native, p, c.want)
		}
	}
}
