package kernels

import "fmt"

// The softmax row operations work on a matrix s of rows of m = len(v)
// values (attention's scores, one row per cache slot, one column per
// query) against one vector v of m values, row by row in order. Each is
// elementwise IEEE arithmetic, so the vector forms give the scalar
// forms' bits; they exist because the scalar loops were a quarter of
// attention at depth.

// ScaleMaxRows sets s[j][i] *= scale and then mx[i] to s[j][i] where that
// is greater (a NaN never replaces mx[i]), for every row j in order.
func ScaleMaxRows(s []float32, scale float32, mx []float32) {
	if checkRows("ScaleMaxRows", len(s), len(mx)) {
		scaleMaxRows(s, scale, mx)
	}
}

// SubRows sets s[j][i] -= v[i].
func SubRows(s, v []float32) {
	if checkRows("SubRows", len(s), len(v)) {
		subRows(s, v)
	}
}

// MulRows sets s[j][i] *= v[i].
func MulRows(s, v []float32) {
	if checkRows("MulRows", len(s), len(v)) {
		mulRows(s, v)
	}
}

// SumRowsF64 adds float64(s[j][i]) to sum[i], row by row in order.
func SumRowsF64(sum []float64, s []float32) {
	if checkRows("SumRowsF64", len(s), len(sum)) {
		sumRowsF64(sum, s)
	}
}

// checkRows panics unless s holds whole rows of m; it reports whether
// there is anything to do.
func checkRows(name string, ns, m int) bool {
	if m == 0 && ns == 0 {
		return false
	}
	if m == 0 || ns%m != 0 {
		panic(fmt.Sprintf("kernels: %s: %d values are not whole rows of %d", name, ns, m))
	}
	return ns > 0
}

var (
	scaleMaxRows = scaleMaxRowsGo
	subRows      = subRowsGo
	mulRows      = mulRowsGo
	sumRowsF64   = sumRowsF64Go
)

func scaleMaxRowsGo(s []float32, scale float32, mx []float32) {
	m := len(mx)
	for j := 0; j < len(s); j += m {
		row := s[j : j+m]
		for i, v := range row {
			v *= scale
			row[i] = v
			if v > mx[i] {
				mx[i] = v
			}
		}
	}
}

func subRowsGo(s, v []float32) {
	m := len(v)
	for j := 0; j < len(s); j += m {
		row := s[j : j+m]
		for i := range row {
			row[i] -= v[i]
		}
	}
}

func mulRowsGo(s, v []float32) {
	m := len(v)
	for j := 0; j < len(s); j += m {
		row := s[j : j+m]
		for i := range row {
			row[i] *= v[i]
		}
	}
}

func sumRowsF64Go(sum []float64, s []float32) {
	m := len(sum)
	for j := 0; j < len(s); j += m {
		for i, v := range s[j : j+m] {
			sum[i] += float64(v)
		}
	}
}
