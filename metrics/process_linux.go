package metrics

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// collectProcess adds the process's series (CPU, memory, descriptors,
// start time, network), under the names the Prometheus client's process
// collector gives them. A figure that cannot be read is left out.
func collectProcess(s *scrape) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		s.counter("process_cpu_seconds_total", "User and system CPU time spent, in seconds.", cpu.Seconds())
	}
	page := float64(os.Getpagesize())
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) >= 2 {
			if v, err := strconv.ParseFloat(string(f[0]), 64); err == nil {
				s.gauge("process_virtual_memory_bytes", "Virtual memory size, in bytes.", v*page)
			}
			if v, err := strconv.ParseFloat(string(f[1]), 64); err == nil {
				s.gauge("process_resident_memory_bytes", "Resident memory size, in bytes.", v*page)
			}
		}
	}
	if start, ok := processStart(); ok {
		s.gauge("process_start_time_seconds", "When the process started, in seconds since the epoch.", start)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.gauge("process_open_fds", "Open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		s.gauge("process_max_fds", "The limit of open file descriptors.", float64(lim.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		s.gauge("process_virtual_memory_max_bytes", "The limit of virtual memory, in bytes.", float64(lim.Cur))
	}
	if rx, tx, ok := networkBytes(); ok {
		s.counter("process_network_receive_bytes_total", "Bytes received on the process's network interfaces.", rx)
		s.counter("process_network_transmit_bytes_total", "Bytes sent on the process's network interfaces.", tx)
	}
}

// userHZ is the clock tick /proc counts times in (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

// processStart is the process's start from /proc/self/stat (ticks after
// boot) and /proc/stat (boot time), in seconds since the epoch.
func processStart() (float64, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// after it are counted from its closing parenthesis (state is 3).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	const startTime = 22 - 3 // starttime is field 22; f[0] is field 3
	if len(f) <= startTime {
		return 0, false
	}
	ticks, err := strconv.ParseFloat(string(f[startTime]), 64)
	if err != nil {
		return 0, false
	}
	all, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(all, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
			if err != nil {
				return 0, false
			}
			return boot + ticks/userHZ, true
		}
	}
	return 0, false
}

// networkBytes sums the bytes received and sent over the interfaces of
// the process's network namespace (/proc/self/net/dev).
func networkBytes() (rx, tx float64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return 0, 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		_, counts, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		f := bytes.Fields(counts)
		if len(f) < 9 {
			continue
		}
		r, err1 := strconv.ParseFloat(string(f[0]), 64)
		t, err2 := strconv.ParseFloat(string(f[8]), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		rx, tx, ok = rx+r, tx+t, true
	}
	return rx, tx, ok
}
