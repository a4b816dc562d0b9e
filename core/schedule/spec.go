package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Spec is a schedule's timing as read from chat.
type Spec struct {
	// Interval or Cron is set.
	Interval time.Duration
	Cron     string
	// Timezone is the zone the words named ("" = the default).
	Timezone string
	// Text is the timing in words, for /schedules.
	Text string
}

// Usage explains /schedule; it follows the reason a spec was refused.
const Usage = `Usage: /schedule <when> <what>
when is one of:
  every 30m | every 2h | every 90 minutes | every 3 days
  every day at 9:00 | every weekday at 9:00 | every weekend at 10:30
  every monday at 8:30 | every mon,thu at 17:00 | daily at 7am | hourly
  cron 0 9 * * 1-5   (minute hour day-of-month month day-of-week)
  add "in Europe/Berlin" after a time for another time zone
what is the prompt I answer each time, e.g.
  /schedule every weekday at 9:00 summarize yesterday's open incidents`

// word is one space-separated word of the arguments and where the rest
// of the text after it starts.
type word struct {
	text string
	end  int
}

func words(s string) []word {
	var out []word
	i := 0
	for i < len(s) {
		for i < len(s) && unicode.IsSpace(rune(s[i])) {
			i++
		}
		start := i
		for i < len(s) && !unicode.IsSpace(rune(s[i])) {
			i++
		}
		if i > start {
			out = append(out, word{s[start:i], i})
		}
	}
	return out
}

var weekdays = map[string]int{"sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6,
	"sun": 0, "mon": 1, "tue": 2, "tues": 2, "wed": 3, "thu": 4, "thur": 4, "thurs": 4, "fri": 5, "sat": 6}

// ParseSpec reads a schedule's timing from the start of args (the
// arguments of /schedule) and returns it with the rest of args: what to
// do. The error says what was not understood; Usage explains the forms.
func ParseSpec(args string) (Spec, string, error) {
	ws := words(args)
	if len(ws) == 0 {
		return Spec{}, "", errors.New("say when and what")
	}
	lower := func(i int) string {
		if i < len(ws) {
			return strings.ToLower(strings.Trim(ws[i].text, ","))
		}
		return ""
	}
	var sp Spec
	next := 0 // index of the first word after the timing
	switch lower(0) {
	case "cron":
		var fields []string
		for i := 1; i < len(ws) && len(fields) < 5; i++ {
			for _, f := range strings.Fields(strings.Trim(ws[i].text, `"'`)) {
				fields = append(fields, f)
			}
			next = i + 1
		}
		expr := strings.Join(fields, " ")
		if _, err := ParseCron(expr); err != nil {
			return Spec{}, "", err
		}
		sp = Spec{Cron: expr, Text: "cron " + expr}
	case "hourly":
		sp, next = Spec{Interval: time.Hour, Text: "every 1h"}, 1
	case "daily", "at":
		i := 1
		if lower(0) == "daily" {
			if lower(1) != "at" {
				return Spec{}, "", errors.New(`"daily" needs a time: daily at 9:00`)
			}
			i = 2
		}
		var err error
		if sp, next, err = atTime(ws, i, "*", "every day"); err != nil {
			return Spec{}, "", err
		}
	case "every":
		var err error
		if sp, next, err = every(ws, lower); err != nil {
			return Spec{}, "", err
		}
	default:
		return Spec{}, "", fmt.Errorf("%q is not how a schedule starts: start with every, daily, hourly, at or cron", ws[0].text)
	}
	if next < len(ws) && lower(next) == "in" && next+1 < len(ws) && looksLikeZone(ws[next+1].text) {
		if sp.Interval > 0 {
			return Spec{}, "", errors.New("a time zone only goes with a time of day (every day at 9:00 in Europe/Berlin)")
		}
		zone := ws[next+1].text
		if _, err := LoadZone(zone, time.UTC); err != nil {
			return Spec{}, "", err
		}
		sp.Timezone, sp.Text = zone, sp.Text+" in "+zone
		next += 2
	}
	rest := ""
	if next > 0 && next <= len(ws) {
		rest = strings.TrimSpace(args[ws[next-1].end:])
	}
	if rest == "" {
		return Spec{}, "", errors.New("say what I should do at that time after the schedule (the prompt)")
	}
	return sp, rest, nil
}

func looksLikeZone(s string) bool {
	return strings.Contains(s, "/") || strings.EqualFold(s, "UTC")
}

// every reads "every …" from ws[0].
func every(ws []word, lower func(int) string) (Spec, int, error) {
	w1 := lower(1)
	switch w1 {
	case "":
		return Spec{}, 0, errors.New(`"every" needs what follows: every 30m, every day at 9:00, …`)
	case "minute":
		return Spec{Interval: time.Minute, Text: "every 1m"}, 2, nil
	case "hour":
		return Spec{Interval: time.Hour, Text: "every 1h"}, 2, nil
	case "day", "weekday", "weekdays", "weekend", "weekends":
		dow := map[string]string{"day": "*", "weekday": "1-5", "weekdays": "1-5", "weekend": "0,6", "weekends": "0,6"}[w1]
		text := map[string]string{"day": "every day", "weekday": "every weekday", "weekdays": "every weekday", "weekend": "every weekend day", "weekends": "every weekend day"}[w1]
		if lower(2) != "at" {
			return Spec{}, 0, fmt.Errorf(`"every %s" needs a time: every %s at 9:00`, w1, w1)
		}
		return atTime(ws, 3, dow, text)
	}
	// A Go duration (30m, 1h30m) or a number and a unit (90 minutes).
	if d, err := time.ParseDuration(w1); err == nil {
		if d <= 0 {
			return Spec{}, 0, fmt.Errorf("%q is not a positive duration", ws[1].text)
		}
		return Spec{Interval: d, Text: "every " + Every(d)}, 2, nil
	}
	if n, err := strconv.Atoi(w1); err == nil {
		unit := lower(2)
		var per time.Duration
		switch strings.TrimSuffix(unit, "s") {
		case "second", "sec":
			per = time.Second
		case "minute", "min":
			per = time.Minute
		case "hour", "hr":
			per = time.Hour
		case "day":
			per = 24 * time.Hour
		case "week":
			per = 7 * 24 * time.Hour
		default:
			return Spec{}, 0, fmt.Errorf("%q after %d is not a unit: use minutes, hours, days or weeks", unit, n)
		}
		if n <= 0 {
			return Spec{}, 0, fmt.Errorf("every %d %s is not a positive interval", n, unit)
		}
		d := time.Duration(n) * per
		return Spec{Interval: d, Text: "every " + Every(d)}, 3, nil
	}
	// Days of the week: every monday, every mon,thu, every monday and friday.
	var days []int
	i := 1
	for ; i < len(ws); i++ {
		w := strings.ToLower(ws[i].text)
		if w == "and" || w == "," {
			continue
		}
		found := false
		for _, part := range strings.Split(w, ",") {
			if part == "" {
				continue
			}
			d, ok := weekdays[strings.TrimSuffix(part, "s")]
			if !ok {
				d, ok = weekdays[part]
			}
			if !ok {
				break
			}
			days = append(days, d)
			found = true
		}
		if !found {
			break
		}
	}
	if len(days) == 0 {
		return Spec{}, 0, fmt.Errorf("%q after every is not something I can count: use a duration (30m, 2h), a number and a unit (90 minutes), day, weekday, weekend or a day of the week", ws[1].text)
	}
	if i >= len(ws) || strings.ToLower(ws[i].text) != "at" {
		return Spec{}, 0, errors.New("days of the week need a time: every monday at 9:00")
	}
	var names []string
	var dow []string
	for _, d := range days {
		names = append(names, strings.ToUpper(dayNames[d][:1])+dayNames[d][1:])
		dow = append(dow, strconv.Itoa(d))
	}
	return atTime(ws, i+1, strings.Join(dow, ","), "every "+strings.Join(names, ","))
}

// atTime reads a time of day at ws[i] and builds the cron expression of
// that time on the days dow.
func atTime(ws []word, i int, dow, text string) (Spec, int, error) {
	if i >= len(ws) {
		return Spec{}, 0, errors.New("a time of day is missing after \"at\" (9:00, 17:30, 7am)")
	}
	h, m, err := timeOfDay(ws[i].text)
	if err != nil {
		return Spec{}, 0, err
	}
	expr := fmt.Sprintf("%d %d * * %s", m, h, dow)
	return Spec{Cron: expr, Text: fmt.Sprintf("%s at %02d:%02d", text, h, m)}, i + 1, nil
}

// timeOfDay reads 9:00, 09:30, 17:45, 9, 9am, 9:30pm.
func timeOfDay(s string) (h, m int, err error) {
	t := strings.ToLower(strings.TrimSuffix(s, ","))
	pm, am := strings.HasSuffix(t, "pm"), strings.HasSuffix(t, "am")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "pm"), "am")
	hs, ms, hasMin := strings.Cut(t, ":")
	bad := fmt.Errorf("%q is not a time of day: use 9:00, 17:30 or 7am", s)
	if h, err = strconv.Atoi(hs); err != nil {
		return 0, 0, bad
	}
	if hasMin {
		if len(ms) != 2 {
			return 0, 0, bad
		}
		if m, err = strconv.Atoi(ms); err != nil {
			return 0, 0, bad
		}
	}
	if am || pm {
		if h < 1 || h > 12 {
			return 0, 0, bad
		}
		h %= 12
		if pm {
			h += 12
		}
	}
	if h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, 0, bad
	}
	return h, m, nil
}

// Every writes an interval the way a person does: 2h, 1h30m, 45m, 1m30s
// (Go writes 2h0m0s, 1h30m0s, 45m0s).
func Every(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
