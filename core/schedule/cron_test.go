package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	utc := time.UTC
	at := func(loc *time.Location, s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		expr  string
		loc   *time.Location
		after string
		want  string
	}{
		{"0 9 * * 1-5", utc, "2026-05-01 08:59", "2026-05-01 09:00"}, // a Friday
		{"0 9 * * 1-5", utc, "2026-05-01 09:00", "2026-05-04 09:00"}, // over the weekend
		{"*/15 * * * *", utc, "2026-05-01 10:07", "2026-05-01 10:15"},
		{"30 17 * * mon,THU", utc, "2026-05-01 00:00", "2026-05-04 17:30"},
		{"0 0 1 jan *", utc, "2026-05-01 00:00", "2027-01-01 00:00"},
		{"0 12 * * 7", utc, "2026-05-01 00:00", "2026-05-03 12:00"},     // 7 is Sunday
		{"0 8 13 * 5", utc, "2026-05-01 09:00", "2026-05-08 08:00"},     // day of month OR day of week
		{"0 8 */10 * *", utc, "2026-05-02 00:00", "2026-05-11 08:00"},   // 1, 11, 21, 31
		{"@daily", utc, "2026-05-01 00:00", "2026-05-02 00:00"},         // a macro
		{"0 9 * * *", berlin, "2026-05-01 06:59", "2026-05-01 09:00"},   // in Berlin (UTC+2)
		{"30 2 * * *", berlin, "2026-03-29 01:00", "2026-03-29 03:30"},  // skipped by the DST change: runs after the gap
		{"0 9 30 2 *", utc, "2026-01-01 00:00", ""},                     // never
		{"5-10/5 1 * * *", utc, "2026-05-01 01:06", "2026-05-01 01:10"}, // range with step
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		got := c.Next(at(tt.loc, tt.after), tt.loc)
		if tt.want == "" {
			if !got.IsZero() {
				t.Errorf("%s after %s = %s; want never", tt.expr, tt.after, got)
			}
			continue
		}
		if want := at(tt.loc, tt.want); !got.Equal(want) {
			t.Errorf("%s after %s in %s = %s; want %s", tt.expr, tt.after, tt.loc, got.In(tt.loc), want)
		}
	}
}

func TestCronErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"0 9 * *":        "needs five",
		"60 9 * * *":     "minute field",
		"0 24 * * *":     "hour field",
		"0 9 0 * *":      "day of month",
		"0 9 * 13 *":     "month field",
		"0 9 * * funday": "day of week",
		"0 9 * * 5-1":    "backwards",
		"*/0 * * * *":    "step",
		"1,,2 * * * *":   "empty",
	} {
		_, err := ParseCron(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error about %q", expr, err, want)
		}
	}
}

func TestIntervalNext(t *testing.T) {
	anchor := time.Date(2026, 5, 1, 10, 17, 0, 0, time.UTC)
	w := When{Interval: 6 * time.Hour, Anchor: anchor}
	for after, want := range map[time.Time]time.Time{
		anchor:                       anchor.Add(6 * time.Hour),
		anchor.Add(-time.Hour):       anchor.Add(6 * time.Hour),
		anchor.Add(6 * time.Hour):    anchor.Add(12 * time.Hour),
		anchor.Add(50 * time.Hour):   anchor.Add(54 * time.Hour),
		anchor.Add(5*time.Hour + 59): anchor.Add(6 * time.Hour),
	} {
		if got := w.Next(after); !got.Equal(want) {
			t.Errorf("next after %s = %s; want %s", after, got, want)
		}
	}
}
