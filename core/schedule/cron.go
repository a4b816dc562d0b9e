package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed five-field cron expression: minute, hour, day of
// month, month, day of week.
type Cron struct {
	minute, hour, dom, month, dow uint64
	// domAny and dowAny say the field starts with "*": when neither
	// does, a day matching either day field matches (as cron does).
	domAny, dowAny bool
	expr           string
}

var cronMacros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseCron parses five cron fields ("0 9 * * 1-5"): each field is "*",
// a number, a range "a-b", a step "*/n" or "a-b/n", or a comma list of
// those; months and days of week may be named (jan, mon); day of week 0
// and 7 are Sunday. @hourly, @daily, @weekly, @monthly and @yearly are
// accepted too.
func ParseCron(expr string) (*Cron, error) {
	src := strings.TrimSpace(expr)
	if m, ok := cronMacros[strings.ToLower(src)]; ok {
		src = m
	}
	f := strings.Fields(src)
	if len(f) != 5 {
		return nil, fmt.Errorf("cron %q has %d fields; it needs five: minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\"", expr, len(f))
	}
	c := &Cron{expr: strings.Join(f, " ")}
	var err error
	specs := []struct {
		name     string
		lo, hi   int
		names    []string
		dst      *uint64
		anyField *bool
	}{
		{"minute", 0, 59, nil, &c.minute, nil},
		{"hour", 0, 23, nil, &c.hour, nil},
		{"day of month", 1, 31, nil, &c.dom, &c.domAny},
		{"month", 1, 12, monthNames, &c.month, nil},
		{"day of week", 0, 7, dayNames, &c.dow, &c.dowAny},
	}
	for i, s := range specs {
		if *s.dst, err = parseField(f[i], s.lo, s.hi, s.names); err != nil {
			return nil, fmt.Errorf("cron %q: %s field %q: %w", expr, s.name, f[i], err)
		}
		if s.anyField != nil {
			*s.anyField = strings.HasPrefix(f[i], "*")
		}
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday
		c.dow |= 1
	}
	return c, nil
}

// String is the expression's five fields.
func (c *Cron) String() string { return c.expr }

func parseField(s string, lo, hi int, names []string) (uint64, error) {
	var set uint64
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			return 0, fmt.Errorf("empty list item")
		}
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepStr)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err error
			if a, err = fieldValue(x, lo, hi, names); err != nil {
				return 0, err
			}
			if b, err = fieldValue(y, lo, hi, names); err != nil {
				return 0, err
			}
			if a > b {
				return 0, fmt.Errorf("range %s goes backwards", rng)
			}
		default:
			v, err := fieldValue(rng, lo, hi, names)
			if err != nil {
				return 0, err
			}
			a, b = v, v
			if hasStep {
				b = hi
			}
		}
		for v := a; v <= b; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func fieldValue(s string, lo, hi int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			if names[0] == "jan" {
				return i + 1, nil
			}
			return i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if names != nil {
			return 0, fmt.Errorf("%q is not a number from %d to %d or a name (%s)", s, lo, hi, strings.Join(names, ", "))
		}
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, lo, hi)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is outside %d-%d", v, lo, hi)
	}
	return v, nil
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

func (c *Cron) dayMatches(t time.Time) bool {
	dom, dow := has(c.dom, t.Day()), has(c.dow, int(t.Weekday()))
	if c.domAny || c.dowAny {
		return dom && dow
	}
	return dom || dow
}

// Next returns the first time after after, in loc, that the expression
// matches (zero when none within five years, like February 30th). A time
// a daylight-saving change skips runs when the clock is past the gap.
func (c *Cron) Next(after time.Time, loc *time.Location) time.Time {
	t := after.In(loc)
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, loc)
	for i := 0; i < 5*366+1; i++ {
		date := day.AddDate(0, 0, i)
		if !has(c.month, int(date.Month())) || !c.dayMatches(date) {
			continue
		}
		for h := c.hour; h != 0; h &= h - 1 {
			hour := bits.TrailingZeros64(h)
			for mm := c.minute; mm != 0; mm &= mm - 1 {
				minute := bits.TrailingZeros64(mm)
				cand := time.Date(date.Year(), date.Month(), date.Day(), hour, minute, 0, 0, loc)
				if cand.After(after) {
					return cand
				}
			}
		}
	}
	return time.Time{}
}
