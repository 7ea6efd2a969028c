package kernels

import "math"

// dotMin is the length from which Dot calls the SIMD kernel (below it the
// cgo call costs more than it saves).
const dotMin = 256

// Dot returns sum_i a[i]*b[i] over len(a) elements (b must be as long).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if len(a) >= dotMin && activeISA != isaGo {
		return dotC(activeISA, a, b)
	}
	return dotGo(a, b)
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy computes y[i] += alpha * x[i] for i < len(y).
func Axpy(alpha float32, x, y []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += alpha * x[i]
		y[i+1] += alpha * x[i+1]
		y[i+2] += alpha * x[i+2]
		y[i+3] += alpha * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += alpha * x[i]
	}
}

// Scale computes x[i] *= alpha.
func Scale(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}

// Add computes dst[i] += x[i] for i < len(dst). From addMinC values the C
// kernels add a vector at a time (the same sums: each is one rounding).
func Add(dst, x []float32) {
	x = x[:len(dst)]
	if len(dst) >= addMinC && addFast(dst, x) {
		return
	}
	for i := range dst {
		dst[i] += x[i]
	}
}

// addMinC: the length from which the C loop pays for its cgo call. Machine
// A, ns per Add, Go loop / C: 64 values 37 / 27, 256 values 187-199 / 31.
const addMinC = 64

// RMSNorm writes dst[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] for i < len(x)
// (the sum of squares in float64); dst may alias x.
func RMSNorm(dst, x, w []float32, eps float32) {
	dst, w = dst[:len(x)], w[:len(x)]
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(s/float64(len(x))+float64(eps)))
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

// SiLUMul computes gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
// With the C kernels e^-g is a vector approximation within a few float32
// ulps (siluMulGo is the reference).
func SiLUMul(gate, up []float32) {
	up = up[:len(gate)]
	if len(gate) > 0 && siluMulFast(gate, up) {
		return
	}
	siluMulGo(gate, up)
}

func siluMulGo(gate, up []float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// SwiGLUOAI computes gpt-oss's clamped SwiGLU as ggml does:
// gate[i] = g / (1 + e^(-alpha·g)) · (u + 1), g = min(gate[i], limit),
// u = up[i] clamped to [-limit, limit]. With the C kernels e^x is the
// vector approximation of SiLUMul (swigluOAIGo is the reference).
func SwiGLUOAI(gate, up []float32, alpha, limit float32) {
	up = up[:len(gate)]
	if len(gate) > 0 && swigluOAIFast(gate, up, alpha, limit) {
		return
	}
	swigluOAIGo(gate, up, alpha, limit)
}

func swigluOAIGo(gate, up []float32, alpha, limit float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		g = min(g, limit)
		u := min(max(up[i], -limit), limit)
		e := float32(math.Exp(float64(float32(alpha * -g))))
		gate[i] = g / float32(1+e) * float32(u+1)
	}
}

// Softmax replaces x by exp(x - max) / sum, in place.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		s += float64(e)
	}
	inv := float32(1 / s)
	for i := range x {
		x[i] *= inv
	}
}

// Exps sets dst[i] = e^src[i] for i < len(src) (dst may alias src). With
// the C kernels it is a vector approximation within a few float32 ulps
// (inputs are clamped to [-87, 88]); expsGo is the reference.
func Exps(dst, src []float32) {
	dst = dst[:len(src)]
	if len(src) > 0 && expsFast(dst, src) {
		return
	}
	expsGo(dst, src)
}

func expsGo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(math.Exp(float64(v)))
	}
}

// MulVecT sets y[c] = sum_r x[r] * a[r*cols+c] for c < cols: y = Aᵀx for a
// row-major rows x cols matrix A (attention's softmax weights times V).
func MulVecT(y, a, x []float32, rows, cols int) {
	if rows < 0 || cols < 0 || len(a) < rows*cols || len(x) < rows || len(y) < cols {
		panic("kernels: MulVecT: short slices")
	}
	if cols == 0 {
		return
	}
	if rows > 0 && mulVecTFast(y, a, x, rows, cols) {
		return
	}
	mulVecTGo(y, a, x, rows, cols)
}

func mulVecTGo(y, a, x []float32, rows, cols int) {
	y = y[:cols]
	clear(y)
	for r := range rows {
		xv := x[r]
		for c, v := range a[r*cols : (r+1)*cols] {
			y[c] += xv * v
		}
	}
}
