//go:build !race

package textfmt

const raceEnabled = false
