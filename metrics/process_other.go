//go:build !linux

package metrics

// collectProcess adds nothing: the process series are read from /proc,
// on Linux only.
func collectProcess(*scrape) {}
