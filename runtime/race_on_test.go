//go:build race

package runtime

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put back, so pooled scratch is allocated again.
const raceEnabled = true
