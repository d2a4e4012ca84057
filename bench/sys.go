package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the process's peak resident set size in bytes (VmHWM
// from /proc/self/status), or 0 where that is not available.
func PeakRSS() int64 { return procStatusKB("VmHWM:") * 1024 }

// ResetPeakRSS restarts the peak RSS count at the current resident set
// (Linux: "5" written to /proc/self/clear_refs), so that PeakRSS measures
// what follows. It reports whether the reset worked.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func procStatusKB(key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// LoadAvg returns the 1-, 5- and 15-minute load averages (/proc/loadavg),
// zeros where that is not available. The machine is shared: every number
// is reported with the load it was measured under.
func LoadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	if _, err := fmt.Sscan(string(b), &l[0], &l[1], &l[2]); err != nil {
		return [3]float64{}
	}
	return l
}

// cpuModel is the processor's model name (the first "model name" line of
// /proc/cpuinfo), or "" where that is not available.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
