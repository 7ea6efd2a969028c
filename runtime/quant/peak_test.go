package quant

import "testing"

func TestMeasurePeaks(t *testing.T) {
	p := MeasurePeaks(make([]float32, 4<<20))
	t.Logf("%v kernels: %+v", ISA(), p)
	if !(p.BandwidthGBs > 0) {
		t.Errorf("bandwidth %v, want > 0", p.BandwidthGBs)
	}
	if activeISA >= isaAVX2 && !(p.GFLOPS > 0) {
		t.Errorf("%v kernels: GFLOPS %v, want > 0", ISA(), p.GFLOPS)
	}
	if (activeISA == isaVNNI) != (p.Int8GOPS > 0) {
		t.Errorf("%v kernels: Int8GOPS %v", ISA(), p.Int8GOPS)
	}
}
