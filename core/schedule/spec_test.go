package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in       string
		interval time.Duration
		cron     string
		zone     string
		text     string
		rest     string
	}{
		{"every weekday at 9:00 summarize yesterday's open incidents", 0, "0 9 * * 1-5", "", "every weekday at 09:00", "summarize yesterday's open incidents"},
		{"every 6h any new releases?", 6 * time.Hour, "", "", "every 6h", "any new releases?"},
		{"every 90 minutes stretch", 90 * time.Minute, "", "", "every 1h30m", "stretch"},
		{"every 3 days water the plants", 72 * time.Hour, "", "", "every 72h", "water the plants"},
		{"every hour ping", time.Hour, "", "", "every 1h", "ping"},
		{"every day at 7am  weather  please", 0, "0 7 * * *", "", "every day at 07:00", "weather  please"},
		{"every monday at 8:30 plan the week", 0, "30 8 * * 1", "", "every Mon at 08:30", "plan the week"},
		{"every mon,thu at 5:30pm standup notes", 0, "30 17 * * 1,4", "", "every Mon,Thu at 17:30", "standup notes"},
		{"every tuesday and friday at 12:00 lunch", 0, "0 12 * * 2,5", "", "every Tue,Fri at 12:00", "lunch"},
		{"every weekend at 10:30 in Europe/Berlin brunch ideas", 0, "30 10 * * 0,6", "Europe/Berlin", "every weekend day at 10:30 in Europe/Berlin", "brunch ideas"},
		{"daily at 23:59 wrap up", 0, "59 23 * * *", "", "every day at 23:59", "wrap up"},
		{"at 6:05 good morning", 0, "5 6 * * *", "", "every day at 06:05", "good morning"},
		{"hourly status", time.Hour, "", "", "every 1h", "status"},
		{`cron "0 9 * * 1-5" digest`, 0, "0 9 * * 1-5", "", "cron 0 9 * * 1-5", "digest"},
		{"cron */5 * * * * tick", 0, "*/5 * * * *", "", "cron */5 * * * *", "tick"},
	}
	for _, tt := range tests {
		sp, rest, err := ParseSpec(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if sp.Interval != tt.interval || sp.Cron != tt.cron || sp.Timezone != tt.zone || sp.Text != tt.text || rest != tt.rest {
			t.Errorf("%q = %+v rest %q; want interval %s cron %q zone %q text %q rest %q", tt.in, sp, rest, tt.interval, tt.cron, tt.zone, tt.text, tt.rest)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     "say when",
		"every fortnight summarize":            `"fortnight" after every`,
		"every weekday summarize":              "needs a time",
		"every weekday at 25:00 summarize":     "not a time of day",
		"every weekday at 9:00":                "say what",
		"every 5 parsecs go":                   "not a unit",
		"every -5m go":                         "positive",
		"tomorrow at 9 go":                     "start with every",
		"cron 0 9 * * go":                      "day of week",
		"every monday go":                      "need a time",
		"every 2h in Europe/Berlin go":         "time of day",
		"every day at 9:00 in Mars/Olympus go": "not known",
	} {
		_, _, err := ParseSpec(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error with %q", in, err, want)
		}
	}
}

func TestEvery(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 45 * time.Minute: "45m", 10 * time.Minute: "10m",
		90 * time.Second: "1m30s", time.Hour + 30*time.Second: "1h0m30s", 72 * time.Hour: "72h",
	} {
		if got := Every(d); got != want {
			t.Errorf("Every(%v) = %q, want %q", d, got, want)
		}
	}
}
