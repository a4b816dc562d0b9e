package media

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator/media/mediatest"
	"github.com/opentalon/opentalon/store"
)

// BenchmarkReadDocument reads a document a user sent, as the gateway
// does the first time (download into the media store, extract the text,
// keep it), and reports p50/p99 of one read: a 40 KB text file and a
// 10-page PDF of about 40 KB of text.
//
//	go test -run '^$' -bench ReadDocument ./orchestrator/media/
func BenchmarkReadDocument(b *testing.B) {
	line := "The quarterly report shows revenue up 12% with costs flat; see the appendix for details."
	var lines []string
	for len(strings.Join(lines, "\n")) < 4000 {
		lines = append(lines, line)
	}
	// make returns a different file each time, so nothing is read from
	// the cache.
	docs := map[string]struct {
		name, mime string
		make       func(i int) string
	}{
		"text": {"notes.txt", "text/plain", func(i int) string {
			return strings.Repeat(line+"\n", 40000/len(line)) + fmt.Sprint(i)
		}},
		"pdf": {"report.pdf", "application/pdf", func(i int) string {
			var pages []mediatest.Page
			for range 10 {
				pages = append(pages, mediatest.TextPage(lines...))
			}
			return string(mediatest.PDF(append(pages, mediatest.TextPage(fmt.Sprint(i)))...))
		}},
	}
	for _, kind := range []string{"text", "pdf"} {
		d := docs[kind]
		b.Run(kind, func(b *testing.B) {
			r := newBenchReader(b)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("%s-%d", kind, i)
				data := d.make(i)
				fetch := func(_ context.Context, _ core.InboundFile, w io.Writer, _ int64) error {
					_, err := io.WriteString(w, data)
					return err
				}
				in := core.Inbound{Conversation: core.ConversationKey{Channel: "bench", Chat: "1"},
					Files: []core.InboundFile{{ID: id, Kind: core.MediaDocument, Name: d.name, MIME: d.mime}}}
				start := time.Now()
				mi, err := r.Read(context.Background(), in, fetch)
				lat = append(lat, time.Since(start))
				if err != nil || mi.Reply != "" || !strings.Contains(mi.Text, "quarterly report") {
					b.Fatalf("Read = %.200q, %v", mi.Text+mi.Reply, err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func newBenchReader(b *testing.B) *Reader {
	db, err := store.Open(context.Background(), b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return New(Options{Store: db, Models: models{}, Extractor: testExtractor(b)})
}
