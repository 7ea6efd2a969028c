package cpu

import (
	"reflect"
	"testing"
)

// sliceBytes sums the bytes of every slice field of the struct v points to.
func sliceBytes(v any) uint64 {
	rv := reflect.ValueOf(v).Elem()
	var n uint64
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Slice {
			n += uint64(f.Len()) * uint64(f.Type().Elem().Size())
		}
	}
	return n
}

// TestStepScratchBytes: the estimate weft serve logs before loading is what
// the backend's per-step buffers take once grown for that step (every slice
// field counted, so a buffer added to scratch or moeScratch without the
// estimate fails here), to within the rotary table of a second base and
// the per-expert counters.
func TestStepScratchBytes(t *testing.T) {
	for _, rel := range []string{"synth/arch2/models/synth-qwen3-256-F32.gguf", "synth/arch2/models/synth-qwen3moe-256-F32.gguf"} {
		t.Run(rel, func(t *testing.T) {
			m := loadModel(t, rel)
			b, err := New(m, Config{NumBlocks: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			const tokens, logits = 37, 5
			b.grow(tokens, logits)
			got := sliceBytes(&b.s)
			if mp := m.HP.MoE; mp.Experts > 0 {
				b.moe.grow(tokens, m.HP.Dim, mp.Experts, mp.Used, mp.FFN)
				got += sliceBytes(&b.moe)
			}
			est := StepScratchBytes(m.HP, tokens, logits)
			t.Logf("estimate %d bytes, buffers %d", est, got)
			slack := uint64(tokens*m.HP.HeadDim*4 + 64*(m.HP.MoE.Experts+1))
			if est < got-min(got, slack) || est > got+slack {
				t.Errorf("StepScratchBytes = %d, buffers take %d (slack %d)", est, got, slack)
			}
		})
	}
}
