package routing

import (
	"math"
	"strconv"
)

// usd writes an amount of US dollars: to the cent when it is a whole
// number of cents ("1.50"), else as precisely as it was given ("0.001",
// "0.075"), so a small budget or price never reads as $0.00.
func usd(v float64) string {
	if c := v * 100; math.Abs(c-math.Round(c)) < 1e-9 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
