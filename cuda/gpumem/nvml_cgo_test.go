//go:build cgo

package gpumem

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type fakeNVML struct {
	init  nvml.Return
	count int
	dev   fakeDev
	shut  int
}

func (f *fakeNVML) Init() nvml.Return                  { return f.init }
func (f *fakeNVML) Shutdown() nvml.Return              { f.shut++; return nvml.SUCCESS }
func (f *fakeNVML) DeviceGetCount() (int, nvml.Return) { return f.count, nvml.SUCCESS }
func (f *fakeNVML) handle(i int) (nvmlDevice, nvml.Return) {
	return f.dev, nvml.SUCCESS
}

type fakeDev struct{ utilRet nvml.Return }

func (fakeDev) GetName() (string, nvml.Return) { return "NVIDIA Fake", nvml.SUCCESS }
func (fakeDev) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	return nvml.Memory{Total: 100, Free: 60, Used: 40}, nvml.SUCCESS
}
func (d fakeDev) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return nvml.Utilization{Gpu: 37}, d.utilRet
}

func TestOpenNVMLErrors(t *testing.T) {
	tests := []struct {
		name    string
		lib     *fakeNVML
		index   int
		wantErr error
	}{
		{name: "library missing", lib: &fakeNVML{init: nvml.ERROR_LIBRARY_NOT_FOUND}, wantErr: ErrNoGPU},
		{name: "driver not loaded", lib: &fakeNVML{init: nvml.ERROR_DRIVER_NOT_LOADED}, wantErr: ErrNoGPU},
		{name: "other init failure", lib: &fakeNVML{init: nvml.ERROR_UNKNOWN}, wantErr: errAny},
		{name: "no such device", lib: &fakeNVML{count: 1}, index: 1, wantErr: ErrNoGPU},
		{name: "ok", lib: &fakeNVML{count: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := openNVML(tc.lib, tc.index)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == errAny && errors.Is(err, ErrNoGPU) {
				t.Errorf("error %v is ErrNoGPU; only missing library/driver are", err)
			}
			if err != nil {
				return
			}
			got, err := n.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			want := Info{Name: "NVIDIA Fake", Total: 100, Free: 60, Used: 40, Utilization: 0.37}
			if got != want {
				t.Errorf("Snapshot = %+v, want %+v", got, want)
			}
			if err := n.Close(); err != nil || tc.lib.shut != 1 {
				t.Errorf("Close = %v, shutdowns %d", err, tc.lib.shut)
			}
			if _, err := n.Snapshot(); err == nil {
				t.Error("Snapshot after Close: no error")
			}
		})
	}
}

// TestOpenNVMLHere opens the real NVML: on a machine without a GPU it must
// say ErrNoGPU, never crash; with one it must read a total.
func TestOpenNVMLHere(t *testing.T) {
	n, err := OpenNVML(0)
	if err != nil {
		if !errors.Is(err, ErrNoGPU) {
			t.Fatalf("OpenNVML: %v, want ErrNoGPU or success", err)
		}
		return
	}
	defer n.Close()
	info, err := n.Snapshot()
	if err != nil || info.Total == 0 {
		t.Fatalf("Snapshot = %+v, %v", info, err)
	}
}
