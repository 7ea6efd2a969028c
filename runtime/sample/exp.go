package sample

import "math"

// expNeg returns e^x as a float32 for x <= 0, to about 2 ulp of float32
// (relative error below 3e-7); results below the smallest normal float32
// are 0. It replaces math.Exp in the loops over the whole vocabulary, where
// math.Exp's float64 accuracy is wasted; TestExpNeg checks it against
// math.Exp and BenchmarkExp compares the two.
func expNeg(x float64) float32 {
	const (
		log2e = 1.4426950408889634
		ln2hi = 0.693145751953125     // ln 2, upper bits (exact in float64 products)
		ln2lo = 1.4286068203094173e-6 // ln 2 - ln2hi
	)
	if !(x > -87.3) { // also catches NaN and -Inf
		return 0
	}
	// x = k ln2 + r, |r| <= ln2/2; e^x = 2^k e^r.
	// Round x*log2e (negative) to the nearest integer; int64 conversion
	// truncates toward zero, hence the -0.5.
	k := float64(int64(x*log2e - 0.5))
	r := (x - k*ln2hi) - k*ln2lo
	// Taylor series of e^r to degree 7 (error < 1.5e-9 on |r| <= 0.347).
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return float32(p * math.Float64frombits(uint64(int64(k)+1023)<<52))
}
