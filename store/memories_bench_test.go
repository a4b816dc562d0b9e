package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// benchWords are the most frequent words of the synthetic memories;
// benchVocabulary adds 20,000 rarer ones, and words are drawn by Zipf's
// law (s = 1.1) as in natural text, so the first words appear in
// thousands of memories and most in a handful.
var benchWords = strings.Fields(`project deploy server database backup report meeting invoice customer
	release staging production cluster kubernetes docker python golang frontend backend api token budget
	coffee lunch vacation birthday wife husband daughter son dog cat garden bike running marathon
	guitar piano spanish german french japanese recipe pasta pizza sushi vegan allergy peanut doctor
	dentist flight hotel berlin paris tokyo london lisbon monday tuesday friday weekend morning evening
	prefers likes hates uses works lives wants needs remembers always never usually short long answers
	markdown tables bullet emails slack jira gitlab github grafana prometheus postgres redis kafka nginx
	linux macos windows laptop phone tablet printer office home remote team manager engineer designer`)

func benchVocabulary() []string {
	out := append([]string(nil), benchWords...)
	for i := 0; i < 20_000; i++ {
		out = append(out, "w"+strconv.FormatInt(int64(i), 36))
	}
	return out
}

// fillMemories inserts n synthetic memories spread over users owners
// (ids "bench:0".."bench:<users-1>") in one transaction.
func fillMemories(b *testing.B, db *DB, n, users int) {
	b.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	vocab := benchVocabulary()
	zipf := rand.NewZipf(rnd, 1.1, 2, uint64(len(vocab)-1))
	err := db.tx(ctx, func(tx *txn) error {
		for i := 0; i < n; i++ {
			words := make([]string, 8+rnd.IntN(10))
			for j := range words {
				words[j] = vocab[zipf.Uint64()]
			}
			if _, err := tx.Tx.ExecContext(ctx, `INSERT INTO memories (owner, content, tags, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
				fmt.Sprintf("bench:%d", i%users), strings.Join(words, " "), "fact", i, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMemorySearch100k is the latency of one memory search over
// 100,000 memories of 1,000 users: as the per-turn recall runs it (one
// user's and the shared memories, top 10), and across every user (the
// command line's `memory search`).
func BenchmarkMemorySearch100k(b *testing.B) {
	db := openTest(b, Options{})
	fillMemories(b, db, 100_000, 1_000)
	ctx := context.Background()
	queries := []string{
		"which database does the production cluster use",
		"what does she prefers for lunch on friday",
		"remind me about the marathon and the piano",
	}
	for _, tc := range []struct {
		name  string
		owner string
	}{{"one-user", "bench:42"}, {"all-users", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				ms, err := db.Memories(ctx, core.MemoryQuery{Owner: tc.owner, WithShared: tc.owner != "", Text: queries[i%len(queries)], Limit: 10})
				if err != nil {
					b.Fatalf("search: %d results, %v", len(ms), err)
				}
				i++
			}
		})
	}
}
