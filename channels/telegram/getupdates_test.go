package telegram

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/opentalon/opentalon/config"
)

// apiBot is a Bot whose Bot API is url, not started.
func apiBot(t *testing.T, url string) *Bot {
	t.Helper()
	cfg := config.Default().Channels.Telegram
	cfg.Token = config.Secret(testToken)
	cfg.APIURL = url
	b, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGetUpdatesReadsAroundAnUnreadableUpdate: an answer whose updates
// all decode is read whole; one with an update the library cannot decode
// still brings the others, and that one as its id alone.
func TestGetUpdatesReadsAroundAnUnreadableUpdate(t *testing.T) {
	good := func(id int, text string) string {
		return `{"update_id":` + strconv.Itoa(id) + `,"message":{"message_id":1,"date":1,"chat":{"id":42,"type":"private"},"text":"` + text + `"}}`
	}
	tests := []struct {
		name   string
		result string
		want   []string // each update's text ("#id" for one without a message)
	}{
		{"none", `[]`, nil},
		{"all readable", `[` + good(7, "a") + `,` + good(8, "b") + `]`, []string{"a", "b"}},
		{"one unreadable", `[` + good(7, "a") + `,{"update_id":8,"message":"not an object"},` + good(9, "c") + `]`, []string{"a", "#8", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"ok":true,"result":`+tc.result+`}`)
			}))
			defer srv.Close()
			updates, err := apiBot(t, srv.URL).getUpdatesWithin(context.Background(), 0, 0)
			if err != nil {
				t.Fatalf("getUpdates: %v", err)
			}
			var got []string
			for _, u := range updates {
				if u.Message == nil {
					got = append(got, "#"+strconv.FormatInt(u.ID, 10))
					continue
				}
				got = append(got, u.Message.Text)
			}
			if !slices.Equal(got, tc.want) || updates == nil {
				t.Errorf("updates %q (nil: %v), want %q", got, updates == nil, tc.want)
			}
		})
	}
}
