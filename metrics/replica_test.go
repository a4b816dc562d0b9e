package metrics

import (
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func labelOf(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// TestReplicaLabelAndDatabaseSeriesOnce: in a cluster the per-process
// series carry replica=<id>; the database's series carry none and are
// exported only while this replica is the one that exports them.
func TestReplicaLabelAndDatabaseSeriesOnce(t *testing.T) {
	var exports atomic.Bool
	m := New(Options{
		Queue:    fakeQueue{counts: map[string]int{"queued": 3}},
		Channels: func() []ChannelStatus { return []ChannelStatus{{Name: "telegram", Up: true}} },
		Replica:  "replica-b",
		Exports:  exports.Load,
		Now:      func() time.Time { return time.Unix(1_780_000_000, 0) },
	})
	m.Accepted("telegram")
	f := gather(t, m)
	if _, ok := f["opentalon_queue_depth"]; ok {
		t.Fatal("a replica that does not export them exported the database's series")
	}
	for _, name := range []string{"opentalon_messages_accepted_total", "opentalon_channel_up", "go_goroutines"} {
		fam, ok := f[name]
		if !ok || len(fam.GetMetric()) == 0 {
			t.Fatalf("no %s", name)
		}
		if v, ok := labelOf(fam.GetMetric()[0], "replica"); !ok || v != "replica-b" {
			t.Errorf("%s has replica=%q (%v); want replica-b", name, v, ok)
		}
	}
	exports.Store(true)
	f = gather(t, m)
	if got := find(t, f, "opentalon_queue_depth", "status", "queued"); got != 3 {
		t.Fatalf("queue depth %v; want 3", got)
	}
	if _, ok := labelOf(f["opentalon_queue_depth"].GetMetric()[0], "replica"); ok {
		t.Error("a database series carries the replica label: summed over replicas it would count the queue once per replica")
	}
}
