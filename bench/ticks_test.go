package bench

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A small multiple's tokens/s axis: starts at 0, three to seven labels
// up to the top, whole numbers once the step is one or more.
func TestRoundTicks(t *testing.T) {
	for _, ymax := range []float64{1.08, 2.5, 7, 48.6, 100, 150.3, 266, 364.1, 999, 12000} {
		ts := roundTicks(ymax).Ticks(0, ymax)
		require.GreaterOrEqual(t, len(ts), 4, "ymax %v: %v", ymax, ts)
		require.LessOrEqual(t, len(ts), 8, "ymax %v: %v", ymax, ts)
		require.Equal(t, 0.0, ts[0].Value)
		for _, tk := range ts {
			v, err := strconv.ParseFloat(tk.Label, 64)
			require.NoError(t, err, tk.Label)
			require.InDelta(t, tk.Value, v, 1e-9, "label %q", tk.Label)
			require.LessOrEqual(t, len(tk.Label), 6, "label %q", tk.Label)
			if ymax >= 3 {
				require.Equal(t, math.Trunc(v), v, "ymax %v: label %q is not whole", ymax, tk.Label)
				require.NotContains(t, tk.Label, ".")
			}
		}
	}
}
