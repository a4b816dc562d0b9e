package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// uploading is the fake channel with uploads: it reports the name each
// file reaches the platform with.
type uploading struct {
	*fakeChannel
	names chan string
}

func (c *uploading) MaxUpload(core.Attachment) int64 { return 1 << 20 }
func (c *uploading) Upload(_ context.Context, _ core.Outbound, f core.Attachment) (string, error) {
	c.names <- f.Name
	return "u1", nil
}

// A file a tool made reaches the platform under a plain file name: a
// plugin's name with directories, no name at all (Slack refuses an
// upload without one) or characters that reorder or hide text is made
// one the user can read as it is.
func TestAnswerFileNamesArePlainNames(t *testing.T) {
	cases := []struct{ name, mime, want string }{
		{"q3.csv", "text/csv", "q3.csv"},
		{"résumé 📈.csv", "text/csv", "résumé 📈.csv"},
		{"reports/2026/q3.csv", "text/csv", "q3.csv"},
		{`..\..\evil.csv`, "text/csv", "evil.csv"},
		{"", "image/png", "file.png"},
		{"..", "text/csv", "file.csv"},
		{"dir/", "", "file"},
		{"invoice\u202Efdp.exe", "", "invoicefdp.exe"},
		{"a\nb\x00.txt", "text/plain", "ab.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := &uploading{fakeChannel: &fakeChannel{notify: make(chan string, 10)}, names: make(chan string, 1)}
			ag := agentFunc(func(_ context.Context, _ core.Turn) (core.Answer, error) {
				return core.Answer{Text: "here it is", Model: "fake/m",
					Files: []core.Attachment{{Name: tc.name, MIME: tc.mime, Data: []byte("a,b\n")}}}, nil
			})
			db := openDB(t, store.Options{})
			r := runWith(t, db, gateway.Options{Store: db, Agent: ag, Workers: 1, MaxAttempts: 1,
				Backoff: func(int) time.Duration { return time.Millisecond }}, ch, ch.fakeChannel)
			r.accept("1", "make the file")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			select {
			case got := <-ch.names:
				if got != tc.want {
					t.Fatalf("uploaded as %q; want %q", got, tc.want)
				}
			case <-ctx.Done():
				t.Fatal("no upload")
			}
		})
	}
}
