package gateway

import "testing"

// BenchmarkStreamDeltas records an answer of 1,000 deltas (a long answer
// streams about one per token) as the agent hands them to a stream, the
// worker already started: the cost of keeping the text so far.
func BenchmarkStreamDeltas(b *testing.B) {
	for b.Loop() {
		s := &stream{started: true, wake: make(chan struct{}, 1)}
		for range 1000 {
			s.Delta("word ")
		}
		if text, _ := s.current(); len(text) != 5000 {
			b.Fatalf("text of %d bytes, want 5000", len(text))
		}
	}
}
