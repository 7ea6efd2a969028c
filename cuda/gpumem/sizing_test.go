package gpumem

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weft-inference/weft/runtime/batch"
)

const gib = 1 << 30

func TestBlocksForGPU(t *testing.T) {
	tests := []struct {
		name    string
		in      GPUBudget
		want    batch.Plan
		wantErr error
	}{
		{
			// 0.9*100 GiB = 90; 90 - 1 - 14 - 3 = 72 GiB of 2 MiB blocks.
			name: "vllm rule",
			in:   GPUBudget{Total: 100 * gib, UsedAtStart: 1 * gib, WeightsBytes: 14 * gib, WorkspaceBytes: 3 * gib, BytesPerBlock: 2 << 20, BlockSize: 16},
			want: batch.Plan{NumBlocks: 72 * 512, BytesPerBlock: 2 << 20, BlockSize: 16, KVBytes: 72 * gib, Tokens: 72 * 512 * 16},
		},
		{
			name: "utilization given, rounds down",
			in:   GPUBudget{Total: 10 * gib, Utilization: 0.5, WeightsBytes: 1 * gib, BytesPerBlock: 3 * gib, BlockSize: 32},
			want: batch.Plan{NumBlocks: 1, BytesPerBlock: 3 * gib, BlockSize: 32, KVBytes: 3 * gib, Tokens: 32},
		},
		{
			name:    "weights do not fit",
			in:      GPUBudget{Total: 10 * gib, WeightsBytes: 9 * gib, BytesPerBlock: 1 << 20, BlockSize: 16},
			wantErr: ErrNoRoom,
		},
		{
			name:    "less than a block left",
			in:      GPUBudget{Total: 10 * gib, WeightsBytes: 9*gib - 1<<19, BytesPerBlock: 1 << 20, BlockSize: 16},
			wantErr: ErrNoRoom,
		},
		{name: "bad utilization", in: GPUBudget{Total: gib, Utilization: 1.5, BytesPerBlock: 1, BlockSize: 1}, wantErr: errAny},
		{name: "no block bytes", in: GPUBudget{Total: gib, BlockSize: 1}, wantErr: errAny},
		{name: "used above total", in: GPUBudget{Total: gib, UsedAtStart: 2 * gib, BytesPerBlock: 1, BlockSize: 1}, wantErr: errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BlocksForGPU(tc.in)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(batch.Plan{}, "Explain")); diff != "" {
				t.Errorf("BlocksForGPU(%+v) mismatch (-want +got):\n%s", tc.in, diff)
			}
			for _, s := range []string{"weights", "workspace", "blocks x", "tokens"} {
				if !strings.Contains(got.String(), s) {
					t.Errorf("log line %q lacks %q", got.String(), s)
				}
			}
		})
	}
}

var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == errAny && err == nil:
		t.Fatalf("no error, want one")
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Fatalf("error %v, want %v", err, want)
	}
}
