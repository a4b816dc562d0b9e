package core

import (
	"fmt"
	"strings"
	"time"
)

// durationUnits are HumanDuration's units, largest first.
var durationUnits = [...]struct {
	size time.Duration
	name string
}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}}

// HumanDuration writes a wait the way a person says it, in its two
// largest units and at least a second: "45 seconds", "2 minutes",
// "1 minute 30 seconds", "5 hours 3 minutes" (Go's String writes 2m0s
// and 5h3m0s, which a chat user should not have to read).
func HumanDuration(d time.Duration) string {
	d = max(d, time.Second)
	// Round to the second unit shown; rounding may reach the next
	// largest unit (59m59.6s is 1 hour).
	for i, u := range durationUnits {
		if d >= u.size || i == len(durationUnits)-1 {
			d = d.Round(durationUnits[min(i+1, len(durationUnits)-1)].size)
			break
		}
	}
	var parts []string
	for _, u := range durationUnits {
		n := d / u.size
		d -= n * u.size
		switch {
		case n == 0 && len(parts) == 0:
			continue
		case n == 0:
			return strings.Join(parts, " ") // "2 hours", not "2 hours 0 minutes"
		}
		name := u.name
		if n != 1 {
			name += "s"
		}
		if parts = append(parts, fmt.Sprintf("%d %s", n, name)); len(parts) == 2 {
			break
		}
	}
	return strings.Join(parts, " ")
}
