// body_exp.h: a fragment: the vector exponential of the C kernels, e^x per lane with
// |relative error| < 2e-7 (a couple of ulps): x is clamped to [-87, 88],
// split as n*ln2 + r (|r| <= ln2/2, Cody-Waite), e^r by its degree-7 Taylor
// polynomial, 2^n through the exponent bits; NaN lanes come back NaN.
// Included (no guard) by body_matmul.h and body_attn.h, each of which defines
// EXP_VF (float vector type), EXP_VI (int vector of the same width),
// EXP_SEL (lane select: mask, a, b) and EXP_NAME (the function's name),
// and may define EXP_CLAMP(x, lo, hi): x clamped to [lo, hi] with NaN lanes
// kept NaN (x86's max and min with x second), the same bits otherwise.
static inline __attribute__((always_inline)) EXP_VF EXP_NAME(EXP_VF x) {
	const EXP_VF lo = (EXP_VF){0} - 87.0f, hi = (EXP_VF){0} + 88.0f;
#ifdef EXP_CLAMP
	// The includer's clamp (max and min instructions) keeps NaN lanes NaN,
	// and the rest carries them through to the result.
	const EXP_VF c = EXP_CLAMP(x, lo, hi);
#else
	EXP_VF c = EXP_SEL(x < lo, lo, x);
	c = EXP_SEL(c > hi, hi, c);
#endif
	const float magic = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
	EXP_VF n = (c * 1.44269504088896341f + magic) - magic;
	EXP_VF r = c - n * 0.693145751953125f;
	r = r - n * 1.42860682030941723212e-6f;
	EXP_VF p = (EXP_VF){0} + (1.0f / 5040);
	p = p * r + (1.0f / 720);
	p = p * r + (1.0f / 120);
	p = p * r + (1.0f / 24);
	p = p * r + (1.0f / 6);
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	EXP_VI e = (__builtin_convertvector(n, EXP_VI) + 127) << 23;
	EXP_VF s;
	memcpy(&s, &e, sizeof s);
#ifdef EXP_CLAMP
	return p * s;
#else
	return EXP_SEL(x != x, x, p * s);
#endif
}
