package core_test

import (
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestHumanDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1 second"},
		{300 * time.Millisecond, "1 second"},
		{18 * time.Second, "18 seconds"},
		{time.Minute, "1 minute"},
		{2 * time.Minute, "2 minutes"},
		{90 * time.Second, "1 minute 30 seconds"},
		{time.Hour, "1 hour"},
		{5*time.Hour + 3*time.Minute + 20*time.Second, "5 hours 3 minutes"},
		{2*time.Hour + 5*time.Second, "2 hours"},
		{time.Hour - 400*time.Millisecond, "1 hour"},
		{2*time.Hour - 20*time.Second, "2 hours"},
		{26 * time.Hour, "1 day 2 hours"},
	} {
		if got := core.HumanDuration(tt.d); got != tt.want {
			t.Errorf("HumanDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
