package clock

import (
	"testing"
	"time"
)

func TestRepeatSpacesOutReports(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Repeat
	type step struct {
		at         time.Duration
		report     bool
		unreported int
	}
	for i, s := range []step{{0, true, 0}, {time.Second, false, 1}, {30 * time.Second, false, 2}, {time.Minute, true, 2}, {61 * time.Second, false, 1}, {2 * time.Minute, true, 1}} {
		report, since, n := r.Failed(t0.Add(s.at))
		if report != s.report || n != s.unreported || !since.Equal(t0) {
			t.Fatalf("failure %d at +%s: report %v, %d unreported, since %s; want %v, %d, %s", i, s.at, report, n, since, s.report, s.unreported, t0)
		}
	}
	if failed, since := r.Recovered(); !failed || !since.Equal(t0) {
		t.Fatalf("recovered: %v since %s; want true since %s", failed, since, t0)
	}
	if failed, _ := r.Recovered(); failed {
		t.Fatal("a second success reports a recovery again")
	}
	if report, since, _ := r.Failed(t0.Add(time.Hour)); !report || !since.Equal(t0.Add(time.Hour)) {
		t.Fatal("the first failure after a recovery is not reported at once")
	}
}
