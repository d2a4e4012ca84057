package cpuvendor

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestIntelMatchesCPUInfo compares Intel with the vendor the Linux kernel
// reports in /proc/cpuinfo.
func TestIntelMatchesCPUInfo(t *testing.T) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || strings.TrimSpace(k) != "vendor_id" {
			continue
		}
		want := runtime.GOARCH == "amd64" && strings.TrimSpace(v) == "GenuineIntel"
		if Intel != want {
			t.Fatalf("Intel = %v, /proc/cpuinfo vendor_id %q", Intel, strings.TrimSpace(v))
		}
		return
	}
	t.Skip("/proc/cpuinfo names no vendor_id")
}
