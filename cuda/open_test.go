//go:build cgo

package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenNoGPU(t *testing.T) {
	noDevice := t.TempDir()
	buildFake(t, noDevice, "libcuda.so.1", fakeDriverSrc, driverSymbols(), "-DINIT_RESULT=100", "-DCOUNT=0")
	zeroDevices := t.TempDir()
	buildFake(t, zeroDevices, "libcuda.so.1", fakeDriverSrc, driverSymbols(), "-DINIT_RESULT=0", "-DCOUNT=0")
	noBLAS := t.TempDir()
	buildFake(t, noBLAS, "libcuda.so.1", fakeDriverSrc, driverSymbols(), "-DINIT_RESULT=0", "-DCOUNT=1")

	tests := []struct {
		name     string
		cfg      Config
		want     error
		wantText string
	}{
		{name: "no libcuda", cfg: Config{LibDir: t.TempDir(), NoDefaultSearch: true}, want: ErrNoDriver},
		{name: "cuInit no device", cfg: Config{LibDir: noDevice, NoDefaultSearch: true}, want: ErrNoDevice, wantText: "CUDA_ERROR_NO_DEVICE (100)"},
		{name: "zero devices", cfg: Config{LibDir: zeroDevices, NoDefaultSearch: true}, want: ErrNoDevice, wantText: "0 present"},
		{name: "ordinal past count", cfg: Config{LibDir: noBLAS, NoDefaultSearch: true, Device: 3}, want: ErrNoDevice},
		{name: "no cublas", cfg: Config{LibDir: noBLAS, NoDefaultSearch: true}, want: ErrNoCUBLAS, wantText: "libcublas.so.13"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(tc.cfg)
			if err == nil {
				d.Close()
				t.Fatalf("Open succeeded, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("Open: %q does not mention %q", err, tc.wantText)
			}
		})
	}
}

// TestOpenFake runs Open to the end against fake driver and cuBLAS
// libraries: symbol resolution, context, module, kernel lookup, handle.
func TestOpenFake(t *testing.T) {
	dir := t.TempDir()
	buildFake(t, dir, "libcuda.so.1", fakeDriverSrc, driverSymbols(), "-DINIT_RESULT=0", "-DCOUNT=1")
	buildFake(t, dir, "libcublas.so.12", fakeBLASSrc, blasSymbols())
	d, err := Open(Config{LibDir: dir, NoDefaultSearch: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.String(), "Fake GPU, sm_90, cuBLAS 13"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if ok, why := d.Healthy(); !ok {
		t.Errorf("Healthy = false (%s)", why)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMissingSymbol(t *testing.T) {
	dir := t.TempDir()
	buildFake(t, dir, "libcuda.so.1", "int cuInit(unsigned f) { return 0; }\n", nil)
	_, err := Open(Config{LibDir: dir, NoDefaultSearch: true})
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "missing symbol") {
		t.Fatalf("Open with a partial libcuda: %v, want ErrNoDriver naming the missing symbol", err)
	}
}

func TestStickyMarksUnhealthy(t *testing.T) {
	d := &Device{}
	if err := d.check("cuMemAlloc", 2); err == nil {
		t.Fatal("check(2) = nil")
	}
	if ok, _ := d.Healthy(); !ok {
		t.Error("out of memory marked the device unhealthy; it is not sticky")
	}
	err := d.check("cuStreamSynchronize", 700)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != 700 || !ce.Sticky() {
		t.Fatalf("check(700) = %v", err)
	}
	if ok, why := d.Healthy(); ok || !strings.Contains(why, "700") {
		t.Errorf("Healthy = %v, %q after an illegal address", ok, why)
	}
}
