//go:build race

package textfmt

// raceEnabled: the race detector makes 1 MB formatting slow, so the
// allocation test takes fewer inputs under it.
const raceEnabled = true
