package quant

import (
	"path/filepath"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

// arch2DequantSHA256 holds, per synth/arch2 model file, the sha256 of
// ggml's float32 (little-endian) dequantization of each of its IQ4_NL,
// IQ4_XS and MXFP4 tensors. TestDequantizeSynthBitExact holds Dequantize
// to them.
//
// How they were made: ggml-base of llama.cpp de3ff81 (/work/ref/llama.cpp,
// ggml/src: ggml.c ggml.cpp ggml-alloc.c ggml-backend.cpp
// ggml-backend-meta.cpp ggml-opt.cpp ggml-threading.cpp ggml-quants.c
// gguf.cpp, compiled with gcc/g++ 12.2 -O2 -DNDEBUG into libggml-base.so),
// and a small C program that opens each file with gguf_init_from_file
// (no_alloc false), calls ggml_get_type_traits(tensor->type)->to_float
// (dequantize_row_iq4_nl / _iq4_xs / _mxfp4) over every IQ4_NL, IQ4_XS and
// MXFP4 tensor, and writes the floats to a file; then `sha256sum` of each.
var arch2DequantSHA256 = map[string][]struct{ tensor, typ, sha256 string }{
	"synth-gptoss-256-MXFP4_MOE.gguf": {
		{"blk.0.ffn_down_exps.weight", "MXFP4", "ea4a79775265328ab25f634686490364d2d6519ffd0fe96cc6880934b65fd4c2"},
		{"blk.0.ffn_gate_exps.weight", "MXFP4", "97ac34f952681b269a7a372e7c47242dc7ba112c694217bda003fc75f98a38b9"},
		{"blk.0.ffn_up_exps.weight", "MXFP4", "f6889a1922d0f102bd204a073ae089094e994ed43a13e47d6cb275ded2a5143f"},
		{"blk.1.ffn_down_exps.weight", "MXFP4", "14b2e83fe2fbeb09282eadf8754f0a38693330e8f192381c782b6f49961435dc"},
		{"blk.1.ffn_gate_exps.weight", "MXFP4", "b8ab193668f4fc2b12013862e8b3ac039e422386f03abadf8dae2be8e319a14b"},
		{"blk.1.ffn_up_exps.weight", "MXFP4", "ca8cccae663a488360d739956782d480e7d414b56e65bdfb5585ceb2098c52f1"},
		{"blk.2.ffn_down_exps.weight", "MXFP4", "e4684b912ca34fc0efe0616da046fd608a3112e7a9801a292601362146c9fad9"},
		{"blk.2.ffn_gate_exps.weight", "MXFP4", "7c16794c4357cbf367a76ed6d3ef82e2bc50d82fc8d6ce81a67704c2c19f5605"},
		{"blk.2.ffn_up_exps.weight", "MXFP4", "5a8ac1a7562192327603771f095bb127594e5d34f607918163f11eba6af1b5f2"},
		{"blk.3.ffn_down_exps.weight", "MXFP4", "8493e418eeda03e27fa86cebcf900023fbde6a19ac891a7c1b533247ed0bebd4"},
		{"blk.3.ffn_gate_exps.weight", "MXFP4", "6f29db5b233b5764ee51d11b119aeb8567dced480832371f99a823a1f876ef94"},
		{"blk.3.ffn_up_exps.weight", "MXFP4", "389f3b754d7083c73dbab7fa8419b7ac8538cb8797c86b093af8cdd0535d8ab8"},
	},
	"synth-qwen3-256-IQ4_NL.gguf": {
		{"blk.0.attn_k.weight", "IQ4_NL", "48b6c9774f05ec5a9de7f8acbce74f27bf6a91c387e1c66e4490073920faea9a"},
		{"blk.0.attn_output.weight", "IQ4_NL", "049c22ae9c00380f4979bc60ee991d2d094cd3486bf35e87034c382ef62437df"},
		{"blk.0.attn_q.weight", "IQ4_NL", "72158a6cfedb6d0e42444ae17335570dae9676780f96c90eaeff9bc798cab908"},
		{"blk.0.attn_v.weight", "IQ4_NL", "94651ab4f02623ec6b4c581795f0a4d8d803c9cbbe2a1017608ffde1cb7d24a6"},
		{"blk.0.ffn_down.weight", "IQ4_NL", "d8a998a3dd4374c14f8e06483bd1ba39c7cdbd9b4220f16212475a12d78b5a63"},
		{"blk.0.ffn_gate.weight", "IQ4_NL", "330ecbc9c307cdbb85554766f9be1bf7fa1dc37b4a2acecabf552aaaa0b1cf2d"},
		{"blk.0.ffn_up.weight", "IQ4_NL", "7be813f33f30a1893c7b9bbdb0d876aaba695bd381d5dbc454fae4b82068df83"},
		{"blk.1.attn_k.weight", "IQ4_NL", "2bb7ee184e15c46147d2550bad085ec9824260aef91fea1b84300f1da1ec721c"},
		{"blk.1.attn_output.weight", "IQ4_NL", "8b59f078d3608cff9880a34d116ec135276014a03abd3cb6fbf05e8b642faf02"},
		{"blk.1.attn_q.weight", "IQ4_NL", "f0c0e34b699fe8f6a8ad33211b68d7f54f4ec16c392d621ad6c659873259e070"},
		{"blk.1.attn_v.weight", "IQ4_NL", "32bc2ebee7961b53c3c3b12b8d09db2e62e2bf9009453efe9e43c14e30023ae0"},
		{"blk.1.ffn_down.weight", "IQ4_NL", "d07ce9e3bd06601d00e629fb084765231fa91bde8a0e87aaba75de95b1eec429"},
		{"blk.1.ffn_gate.weight", "IQ4_NL", "bb34b69b186aab380faa3b7dc116faa1ddb482566ad2fbda93a59afe3ac7523b"},
		{"blk.1.ffn_up.weight", "IQ4_NL", "89718b21630ea9df59b3617f131f49be61b38377756a88a64a2ea07aec2ab1e9"},
		{"blk.2.attn_k.weight", "IQ4_NL", "4e23816fde478aae8de1130c67ca8f851683ee195d1bb2702809a1046a7d79a8"},
		{"blk.2.attn_output.weight", "IQ4_NL", "db115e8070734bd493862353a24ea72cece55a0d2aa2c07f6c4c721f96cc877f"},
		{"blk.2.attn_q.weight", "IQ4_NL", "c366076a9d8bd30212f80b7fb9c5c55406cdce67505982259bfdfe65dd69ad11"},
		{"blk.2.attn_v.weight", "IQ4_NL", "0c67da666438f10b76c1fb1bc48ab68cdf8d21f46472c2b79b911bb19255be68"},
		{"blk.2.ffn_down.weight", "IQ4_NL", "13ed072739da65bccc8b4023a7fb5789f4c72ec52bee35557d5e34aa88438a0e"},
		{"blk.2.ffn_gate.weight", "IQ4_NL", "500e6fe2f77a4fa87cbfecff1843b46a754e2c3c5d1fe2f9847499af376b4524"},
		{"blk.2.ffn_up.weight", "IQ4_NL", "1368b27e845aebaca4470c48431961935cacb075881c0eb8f36390d4617b8cf8"},
		{"blk.3.attn_k.weight", "IQ4_NL", "46827de588643aec9bdd9b3bb7f6a62f5fc85c51b75fb80a4c1cca8463b10c61"},
		{"blk.3.attn_output.weight", "IQ4_NL", "2b5bfdcb44481b2a469e36dfe8e576630b51e1a45328f0b5f6c121ff0e7be254"},
		{"blk.3.attn_q.weight", "IQ4_NL", "85b2459af51538ad9df39c00c89ad4033f3b386772e8552812a5f54d54f80003"},
		{"blk.3.attn_v.weight", "IQ4_NL", "1d89ded092c3d7c810be4e1b64ef83e902d831d79d792297eaece0453d63dd51"},
		{"blk.3.ffn_down.weight", "IQ4_NL", "3c3479c11706d996652781c0dba3b408e67dc5ad898854d3b8bb82336eee9b14"},
		{"blk.3.ffn_gate.weight", "IQ4_NL", "23f6ba51d019da87550df03ec90c9f08ed1dbbd70737b14c6065876c5adf24e9"},
		{"blk.3.ffn_up.weight", "IQ4_NL", "e6d5fb29a5cca162838e9bfda2d75b42b397df9607a76a6d0a61aeff9e9f429f"},
		{"token_embd.weight", "IQ4_NL", "2a88b321661fd7077d0080bbab3eff1c10179f7d77a972c9c3e5251c6bb893ee"},
	},
	"synth-qwen3-256-IQ4_XS.gguf": {
		{"blk.0.attn_k.weight", "IQ4_XS", "f3cad4bdcee57921d90cf0d315e0e7874a5e215671faa3b8ecd6b06cd675671c"},
		{"blk.0.attn_output.weight", "IQ4_XS", "b0a76fd38df24e1db9eb5c004d157a07ed52fd832c9d0f74ba2f2fa5f30289a7"},
		{"blk.0.attn_q.weight", "IQ4_XS", "f2b5fcce437c5ef17fa5c73a82811ad7e2d06e96985f36556a66019ff88fc3c3"},
		{"blk.0.attn_v.weight", "IQ4_XS", "93982ddf76ecaa3306939a2d1ca70c3846161d6bfc3bbb92127f4ec44d63b69b"},
		{"blk.0.ffn_down.weight", "IQ4_XS", "848318f2b266b143eb319b4f3891bffe40953f3dbeca086b1911a1e58482162b"},
		{"blk.0.ffn_gate.weight", "IQ4_XS", "91fc9aff150cbd782ec3b87fd956d6cbe7c432f4d5af1ae2e3d0215e12a3fa57"},
		{"blk.0.ffn_up.weight", "IQ4_XS", "c89b2c599ef1f6d965cecff0e1e0c6c777db86d76903e1f4979f611323cda47f"},
		{"blk.1.attn_k.weight", "IQ4_XS", "e1db60783bc0ff59b7347b7a075092231ba2c852a7ed175eb342ab06daa1baae"},
		{"blk.1.attn_output.weight", "IQ4_XS", "2acdb58b9bdacf0519aa470b8b844defba7ad4781f94924c088e09a1cab15f24"},
		{"blk.1.attn_q.weight", "IQ4_XS", "9fd4d762d39fde7467da029d40038e1223ed62c5fba58abba21212ce654d11e2"},
		{"blk.1.attn_v.weight", "IQ4_XS", "066be03b852e89df7804223b9deec2c5940a561e1002fce13db25fd996549e26"},
		{"blk.1.ffn_down.weight", "IQ4_XS", "aa1613da3f91d3464ad42f8c668b360b12a175649af65c9017d5ec87530560d7"},
		{"blk.1.ffn_gate.weight", "IQ4_XS", "04dd775e96ba13159617e88e80bed1e2fad5225dd96728bc1f82d7a00f56fe0c"},
		{"blk.1.ffn_up.weight", "IQ4_XS", "5126866d8a0b17effdf2a5c09f16655f92121eb4d3e455ec78b6ee6d8548bbf3"},
		{"blk.2.attn_k.weight", "IQ4_XS", "a0af155b414fc468fc6b9966dfb07915b191e1111c5d3d162753b7fa393c3034"},
		{"blk.2.attn_output.weight", "IQ4_XS", "79af82e1dee67b383784a2c2143220094348cffad6ee3cc140cd9e12ec92d5fe"},
		{"blk.2.attn_q.weight", "IQ4_XS", "378b6320330e5aea9049af21b3312701b678cd564ebaf0cc7605aa4f54fbec6b"},
		{"blk.2.attn_v.weight", "IQ4_XS", "616f55bc58b86c388dad22214f87d1f84c2b097c6ae290bb04640e4f7e8176a9"},
		{"blk.2.ffn_down.weight", "IQ4_XS", "8d5d8f49d52dfbd6d099c6e6cc542f954e3131ea1bf2fcab53c6b1c944e5fe00"},
		{"blk.2.ffn_gate.weight", "IQ4_XS", "0b7d3a4f2b048edf459c9556bc2fb847f6c8e970ddc3c129a3df6c1b7cda3541"},
		{"blk.2.ffn_up.weight", "IQ4_XS", "95755f78f6d8dedc6936c167408b2b1a62e6cf993262f64513b3fc61166c7c4d"},
		{"blk.3.attn_k.weight", "IQ4_XS", "5698be12b3ed68624592d04c7b35afb595e52248afe57e5c0966c3d2e5a7811c"},
		{"blk.3.attn_output.weight", "IQ4_XS", "579cf369878cea4445972dade4f611473a56b330b9330a241fe01bda6317942c"},
		{"blk.3.attn_q.weight", "IQ4_XS", "d70811c808db3bdd62eb7d7de7380feb4ad491af5f9ac15cd205730e96cb4708"},
		{"blk.3.attn_v.weight", "IQ4_XS", "42c00d256b3f9bbc1df5b7805e5f198d3c908f6ab205b4741b29b6c70c34c2a4"},
		{"blk.3.ffn_down.weight", "IQ4_XS", "d4370e3b8c535b61a1719d8fe490b55e0f5a3f3ae7a0bd95a2df2be5668643e4"},
		{"blk.3.ffn_gate.weight", "IQ4_XS", "af212cf092bf61e038338db47c0f9bdc89de565a3b648e8d6fc6b181a4c047e2"},
		{"blk.3.ffn_up.weight", "IQ4_XS", "b354581d77fcacaeee7aeca404d4d045b04e5eb356d6f22cb38d5dcc638c31d1"},
		{"token_embd.weight", "IQ4_XS", "739580736a79a757473eab0b30645e4cf27c1b1fe23023896177c1f0943362df"},
	},
}

// TestArch2DequantTableComplete: arch2DequantSHA256 names every IQ4_NL,
// IQ4_XS and MXFP4 tensor of its files, so the bit-exact test checks them
// all (29 IQ4_NL, 29 IQ4_XS and 12 MXFP4 tensors, synth/arch2/README.md).
func TestArch2DequantTableComplete(t *testing.T) {
	count := map[gguf.Type]int{}
	for _, name := range sortedKeys(arch2DequantSHA256) {
		listed := map[string]bool{}
		for _, c := range arch2DequantSHA256[name] {
			listed[c.tensor] = true
		}
		f, err := gguf.Open(shareddata.Path(t, filepath.Join("synth/arch2/models", name)))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range f.Tensors {
			switch ti.Type {
			case gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4:
				count[ti.Type]++
				if !listed[ti.Name] {
					t.Errorf("%s: %s (%v) has no ggml hash", name, ti.Name, ti.Type)
				}
			}
		}
		f.Close()
	}
	want := map[gguf.Type]int{gguf.TypeIQ4_NL: 29, gguf.TypeIQ4_XS: 29, gguf.TypeMXFP4: 12}
	for typ, n := range want {
		if count[typ] != n {
			t.Errorf("%v: %d tensors in the files, want %d", typ, count[typ], n)
		}
	}
}

// TestIQ4Blocks decodes hand-made blocks whose values follow from the
// format alone: the E8M0 scale's ends (subnormal 2^-128 and 2^-127,
// 2^127), the value tables, IQ4_XS's split 6-bit scales.
func TestIQ4Blocks(t *testing.T) {
	nibbles := func(lo, hi byte) []byte { // 16 bytes: values 0-15 lo, 16-31 hi
		b := make([]byte, 16)
		for j := range b {
			b[j] = lo | hi<<4
		}
		return b
	}
	tests := []struct {
		name string
		typ  gguf.Type
		blk  []byte
		want map[int]float32 // index -> value
	}{
		{"mxfp4 e=127 (scale 1/2)", gguf.TypeMXFP4, append([]byte{127}, nibbles(7, 15)...), map[int]float32{0: 6, 16: -6}},
		{"mxfp4 e=0", gguf.TypeMXFP4, append([]byte{0}, nibbles(1, 6)...), map[int]float32{0: 0x1p-128, 31: 0x1p-128 * 8}},
		{"mxfp4 e=1", gguf.TypeMXFP4, append([]byte{1}, nibbles(3, 8)...), map[int]float32{0: 3 * 0x1p-127, 16: 0}},
		{"mxfp4 e=255", gguf.TypeMXFP4, append([]byte{255}, nibbles(1, 9)...), map[int]float32{0: 0x1p127, 16: -0x1p127}},
		{"iq4_nl d=0.5", gguf.TypeIQ4_NL, append([]byte{0x00, 0x38}, nibbles(0, 15)...), map[int]float32{0: -63.5, 16: 56.5}},
		{"iq4_nl d=-2", gguf.TypeIQ4_NL, append([]byte{0x00, 0xc0}, nibbles(8, 7)...), map[int]float32{15: -2, 31: 20}},
	}
	// IQ4_XS: d = 1; sub-block i has scale 32 + i - 4 (low nibbles
	// 12+i..., high bits) except sub-block 7: 63 (scale 31).
	xs := make([]byte, 136)
	xs[0], xs[1] = 0x00, 0x3c
	ls := [8]int{28, 29, 30, 31, 32, 33, 34, 63}
	var sh uint16
	for i, l := range ls {
		xs[4+i/2] |= byte(l&0xf) << (4 * (i % 2))
		sh |= uint16(l>>4) << (2 * i)
	}
	xs[2], xs[3] = byte(sh), byte(sh>>8)
	for i := range 128 {
		xs[8+i] = 0x8f // low nibble 15 (113), high nibble 8 (1)
	}
	want := map[int]float32{}
	for i, l := range ls {
		want[32*i] = float32(l-32) * 113
		want[32*i+16] = float32(l - 32)
	}
	tests = append(tests, struct {
		name string
		typ  gguf.Type
		blk  []byte
		want map[int]float32
	}{"iq4_xs scales", gguf.TypeIQ4_XS, xs, want})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]float32, tc.typ.BlockLen())
			if err := Dequantize(tc.typ, tc.blk, got); err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if got[i] != w {
					t.Errorf("y[%d] = %g, want %g", i, got[i], w)
				}
			}
		})
	}
}
