package schedule

import (
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// When is when a schedule fires: every Interval from Anchor, or on Cron
// in Loc.
type When struct {
	Interval time.Duration
	Anchor   time.Time
	Cron     *Cron
	Loc      *time.Location
}

// Next is the first firing time strictly after after (zero for none).
func (w When) Next(after time.Time) time.Time {
	if w.Cron != nil {
		return w.Cron.Next(after, w.Loc)
	}
	if w.Interval <= 0 {
		return time.Time{}
	}
	if after.Before(w.Anchor) {
		return w.Anchor.Add(w.Interval)
	}
	n := after.Sub(w.Anchor)/w.Interval + 1
	return w.Anchor.Add(n * w.Interval)
}

// LoadZone loads an IANA time zone name; "" is def.
func LoadZone(name string, def *time.Location) (*time.Location, error) {
	if name == "" {
		return def, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not known: use an IANA name such as \"Europe/Berlin\" or \"UTC\"", name)
	}
	return loc, nil
}

// WhenOf reads a stored schedule's timing; def is the zone of a schedule
// that names none.
func WhenOf(s core.Schedule, def *time.Location) (When, error) {
	loc, err := LoadZone(s.Timezone, def)
	if err != nil {
		return When{}, err
	}
	w := When{Interval: s.Interval, Anchor: s.CreatedAt, Loc: loc}
	switch {
	case s.Cron != "" && s.Interval > 0:
		return When{}, fmt.Errorf("schedule #%d has both an interval and a cron expression; keep one", s.ID)
	case s.Cron != "":
		if w.Cron, err = ParseCron(s.Cron); err != nil {
			return When{}, err
		}
	case s.Interval <= 0:
		return When{}, fmt.Errorf("schedule #%d has neither an interval nor a cron expression", s.ID)
	}
	return w, nil
}
