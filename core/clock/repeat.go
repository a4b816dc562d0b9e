package clock

import "time"

// Repeat spaces out the reports of a failure that keeps repeating (a
// database that is down fails a loop's every round): the first failure
// is reported, then one every Every (default a minute) with the count
// since the last, and the recovery once. The zero value is ready; it is
// for one goroutine.
type Repeat struct {
	Every time.Duration

	since, reported time.Time
	unreported      int
}

// Failed records a failure at now and says whether to report it, with
// when the failures began and how many since the last report went
// unreported.
func (r *Repeat) Failed(now time.Time) (report bool, since time.Time, unreported int) {
	every := r.Every
	if every <= 0 {
		every = time.Minute
	}
	if r.since.IsZero() {
		r.since = now
	}
	if !r.reported.IsZero() && now.Sub(r.reported) < every {
		r.unreported++
		return false, r.since, r.unreported
	}
	n := r.unreported
	r.reported, r.unreported = now, 0
	return true, r.since, n
}

// Recovered records a success and says whether failures came before it,
// and since when.
func (r *Repeat) Recovered() (failed bool, since time.Time) {
	if r.since.IsZero() {
		return false, time.Time{}
	}
	since = r.since
	*r = Repeat{Every: r.Every}
	return true, since
}
