package runtime

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFlashBlockTiles checks flashBlock against flashF16, bit for bit,
// where TestAttendBlockMatchesAttend does not reach: depths over several
// slot tiles, whole attnTokens blocks, GQA groups past the eight heads of
// one assembly call, head size 256, and masks whose rows are runs of
// allowed slots split by tile borders.
func TestFlashBlockTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []attnShape{
		{8, 2, 64, 150, 9}, {24, 2, 128, 90, 8}, {8, 2, 256, 40, 3}, {4, 1, 96, 70, 5}, {12, 1, 32, 300, 1},
	} {
		for _, masked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%+v/masked=%v", tc, masked), func(t *testing.T) {
				c := newAttnCase(rng, tc, true)
				n := c.n()
				if masked {
					c.mask = make([]bool, tc.t*n)
					for i := range tc.t {
						on := true
						for j := range n {
							if rng.IntN(7) == 0 {
								on = !on
							}
							c.mask[i*n+j] = on
						}
						c.mask[i*n+rng.IntN(n)] = true
					}
				}
				if err := sameBits(c.blocked(attnTokens, c.flashBlock), c.flashReference()); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
