// body_iq4vnni.h: a fragment of kern_iq4.c, the AVX-512 VNNI row kernel of
// IQ4_NL, MXFP4 and Q4_0, included once per way of loading a 256-column group:
// IQ4V(name) gives each copy's names, IQ4V_VBMI (0 or 1) says whether the
// group's bytes come in by byte permutes (AVX-512 VBMI, iq4_group_vbmi) or
// by 16-byte lane loads and the scales read byte by byte (iq4_scales8,
// iq4_quad). The two give the same bits. Included under kern_iq4.c's
// target pragmas, after the helpers it names.

// iq4_tile: R consecutive rows (at row, stride rowBytes) times NT tokens,
// R * NT <= 4, on weft_vnni_prep's layout; qx, dxl, xs4, grp point at the
// first token (strides K, K/4, K/4, WEFT_GRP_FLOATS * (K/256)), and
// out[t * ldo + i] receives row i's product with token t. ix holds
// iq4_group_vbmi's byte indices (IQ4V_VBMI only). Unless pf is NULL, group
// g also fetches bytes [g * pfb, (g + 1) * pfb) of pf into L2, below
// R * rowBytes (iq4_rows: the tile after next).
//   - Each 256 columns (8 blocks): per half (4 blocks, one a 128-bit
//     lane) the low and high nibbles' values go through two chained
//     vpdpbusd, against grp's reordered activations, so each lane holds
//     8 products of its lane's block; one unpack-and-add of the two
//     halves leaves every block's sum in two lanes (weft_grp_lane). 128
//     times the block's activation sum (grp) is taken off in integers,
//     which leaves the exact block dot product, and one conversion and
//     one FMA by (ws * dx) per token add all 8 blocks.
//   - The remaining columns, 64 at a time: two blocks, lanes 0-7 the
//     first, 8-15 the second, acc += float(S) * (ws * dx) and the offset
//     -128 * ws * xsum4 in a second chain.
//   - The R * NT sums end in one iq4_sum4: a row of 1024 columns is only
//     four groups, and a horizontal sum of its own costs about as much as
//     one of them.
static inline __attribute__((always_inline)) void IQ4V(iq4_tile)(const int type, const uint8_t *row, long rowBytes, int K,
								 const int8_t *qx, const float *dxl, const float *xs4,
								 const float *grp, __m512i tbl, const __m512i *ix, float *out,
								 long ldo, const int R, const int NT, const uint8_t *pf, long pfb) {
	__m512 acc[4], accb[4]; // [i * NT + t]: scaled products, offsets (two FMA chains)
	for (int j = 0; j < R * NT; j++) acc[j] = accb[j] = _mm512_setzero_ps();
	const int K4 = K / 4, G = K / 256, KG = WEFT_GRP_FLOATS * G;
	const int bs = type == 39 ? 17 : 18, hb = type == 39 ? 1 : 2;
	(void)ix, (void)hb;
	for (int g = 0; g < G; g++) {
		if (pf)
			for (long o = ((long)g * pfb) & ~63L; o < (long)(g + 1) * pfb && o < R * rowBytes; o += 64)
				_mm_prefetch((const char *)pf + o, _MM_HINT_T1);
		for (int i = 0; i < R; i++) {
			const uint8_t *rg = row + i * rowBytes + 8 * bs * g;
			__m512 ws;
			__m512i alo, ahi, blo, bhi;
#if IQ4V_VBMI
			iq4_group_vbmi(type, rg, tbl, ix, &ws, &alo, &ahi, &blo, &bhi);
#else
			ws = iq4_scales8(type, rg);
			iq4_quad(rg + hb, bs, tbl, &alo, &ahi);
			iq4_quad(rg + 4 * bs + hb, bs, tbl, &blo, &bhi);
#endif
			for (int t = 0; t < NT; t++) {
				const float *gg = grp + (long)t * KG + WEFT_GRP_FLOATS * g;
				const int8_t *xg = (const int8_t *)gg;
				__m512i sa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), alo, _mm512_loadu_si512(xg));
				__m512i sb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), blo, _mm512_loadu_si512(xg + 128));
				sa = _mm512_dpbusd_epi32(sa, ahi, _mm512_loadu_si512(xg + 64));
				sb = _mm512_dpbusd_epi32(sb, bhi, _mm512_loadu_si512(xg + 192));
				__m512i r = _mm512_add_epi32(_mm512_unpacklo_epi32(sa, sb), _mm512_unpackhi_epi32(sa, sb));
				r = _mm512_sub_epi32(r, _mm512_loadu_si512(gg + 80));
				acc[i * NT + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(r), _mm512_mul_ps(ws, _mm512_loadu_ps(gg + 64)),
								  acc[i * NT + t]);
			}
		}
	}
	const __m512 m128 = _mm512_set1_ps(-128.0f);
	const __m512i pick0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	for (int col = 256 * G; col < K; col += 64) {
		for (int i = 0; i < R; i++) {
			const uint8_t *b0 = row + i * rowBytes + bs * (col / 32);
			__m512 ws;
			if (type == 39) { // MXFP4: 2^(e-128) by vscalefps
				__m512i e = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(b0[0]), _mm512_set1_epi32(b0[17]));
				ws = _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
			} else { // IQ4_NL: both f16 scales converted by one vcvtph2ps
				uint32_t h = (uint32_t)(b0[0] | b0[1] << 8) | (uint32_t)(b0[18] | b0[19] << 8) << 16;
				__m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
				ws = _mm512_permutexvar_ps(pick0, _mm512_castps128_ps512(d));
			}
			__m512i wq = iq4_pair(b0 + hb, b0 + bs + hb, tbl);
			__m512 woff = _mm512_mul_ps(ws, m128);
			for (int t = 0; t < NT; t++) {
				__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, _mm512_loadu_si512(qx + (long)t * K + col));
				acc[i * NT + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
								  _mm512_mul_ps(ws, _mm512_loadu_ps(dxl + (long)t * K4 + col / 4)),
								  acc[i * NT + t]);
				accb[i * NT + t] = _mm512_fmadd_ps(woff, _mm512_loadu_ps(xs4 + (long)t * K4 + col / 4), accb[i * NT + t]);
			}
		}
	}
	for (int j = 0; j < R * NT; j++) acc[j] = _mm512_add_ps(acc[j], accb[j]);
	for (int j = R * NT; j < 4; j++) acc[j] = acc[0];
	__m128 s = iq4_sum4(acc[0], acc[1], acc[2], acc[3]);
	if (NT == 1 && R == 4) {
		_mm_storeu_ps(out, s);
		return;
	}
	float v[4];
	_mm_storeu_ps(v, s);
	for (int i = 0; i < R; i++)
		for (int t = 0; t < NT; t++) out[t * ldo + i] = v[i * NT + t];
}

// iq4_rows: rows [r0, r1) times n tokens. One or two tokens go 4 or 2
// rows at a time, more one row and 4 tokens at a time, then the 1-3 left.
// The tile after next is fetched while this one is computed (within the
// caller's rows; kern_vnni.c's vnni_rows says why): into L1 in a burst
// as the tile starts, or, for one or two tokens on Zen 4 (weft_fetch_l2),
// into L2 a group's share at a time, whatever the chunk (machine D, decode
// of one sequence: the 1B preset in Q4_0 38.0-42.3 tokens/s with the
// burst, 48.4-66.9 spread; gptoss-1.5b in MXFP4_MOE, whose experts are
// 0.56 MB each, 141-153 with the burst, 163-177 spread; synth-110m in
// Q4_0 and IQ4_NL level or faster).
static inline __attribute__((always_inline)) void IQ4V(iq4_rows)(const int type, const uint8_t *w, long rowBytes, int K,
								 int r0, int r1, const int8_t *qx, const float *dxl,
								 const float *xs4, const float *grp, int n, float *y, long ldy) {
	const int K4 = K / 4, KG = WEFT_GRP_FLOATS * (K / 256);
	const __m512i tbl = _mm512_broadcast_i32x4(iq4_table(type, 128));
	__m512i ix[3] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
#if IQ4V_VBMI
	iq4_group_index(type, ix);
#endif
#define IQ4_TILE(R, NT, PF)                                                                                              \
	IQ4V(iq4_tile)(type, row, rowBytes, K, qx + (long)t * K, dxl + (long)t * K4, xs4 + (long)t * K4, grp + (long)t * KG, \
		       tbl, ix, y + t * ldy + r, ldy, R, NT, PF, pfb)
	if (n <= 2) {
		const int R = n == 1 ? 4 : 2, t = 0, G = K / 256, spread = G > 0 && weft_fetch_l2();
		const long pfb = spread ? (R * rowBytes + G - 1) / G : 0; // the spread fetch's bytes per group
		int r = r0;
		for (; r + R <= r1; r += R) {
			const uint8_t *row = w + (long)r * rowBytes, *pf = 0;
			if (r + 3 * R <= r1 && spread) pf = row + 2 * R * rowBytes;
			else if (r + 3 * R <= r1) kq_prefetch(row + 2 * R * rowBytes, R * rowBytes);
			if (n == 1)
				IQ4_TILE(4, 1, pf);
			else
				IQ4_TILE(2, 2, pf);
		}
		for (; r < r1; r++) {
			const uint8_t *row = w + (long)r * rowBytes;
			if (n == 1)
				IQ4_TILE(1, 1, 0);
			else
				IQ4_TILE(1, 2, 0);
		}
		return;
	}
	const long pfb = 0;
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w + (long)r * rowBytes;
		if (r + 2 < r1) kq_prefetch(row + 2 * rowBytes, rowBytes);
		int t = 0;
		for (; t + 4 <= n; t += 4) IQ4_TILE(1, 4, 0);
		switch (n - t) {
		case 1: IQ4_TILE(1, 1, 0); break;
		case 2: IQ4_TILE(1, 2, 0); break;
		case 3: IQ4_TILE(1, 3, 0); break;
		}
	}
#undef IQ4_TILE
}

// iq4_matmul: weft_iq4_vnni_matmul's work, type 20 (IQ4_NL), 2 (Q4_0) or
// 39 (MXFP4), each type compiled with its layout constant.
static void IQ4V(iq4_matmul)(int type, const uint8_t *w, long rowBytes, int K, int r0, int r1, const int8_t *qx,
			     const float *dxl, const float *xs4, const float *grp, int n, float *y, long ldy) {
	if (type == 20)
		IQ4V(iq4_rows)(20, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	else if (type == 2)
		IQ4V(iq4_rows)(2, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
	else
		IQ4V(iq4_rows)(39, w, rowBytes, K, r0, r1, qx, dxl, xs4, grp, n, y, ldy);
}
