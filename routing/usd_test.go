package routing

import "testing"

func TestUSD(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{0, "0.00"}, {1.5, "1.50"}, {20, "20.00"}, {0.01, "0.01"}, {0.1 + 0.2, "0.30"},
		{0.001, "0.001"}, {0.075, "0.075"}, {2.125, "2.125"},
	} {
		if got := usd(tt.v); got != tt.want {
			t.Errorf("usd(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
