//go:build cgo

package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDriverSrc is a stand-in libcuda: every symbol the shim resolves
// exists; INIT_RESULT and COUNT choose what cuInit and cuDeviceGetCount say.
// Memory calls hand out fake addresses and copy nothing; launches count.
const fakeDriverSrc = `
#include <stddef.h>
#include <string.h>
static unsigned long long next = 0x100000;
int launches = 0;
int cuInit(unsigned f) { return INIT_RESULT; }
int cuDeviceGetCount(int *n) { *n = COUNT; return 0; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDeviceGetName(char *s, int n, int d) { strncpy(s, "Fake GPU", n); return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { *v = a == 75 ? 9 : a == 76 ? 0 : a == 16 ? 132 : 0; return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = 80ull << 30; return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuMemGetInfo_v2(size_t *f, size_t *t) { *t = 80ull << 30; *f = 79ull << 30; return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = next; next += (n + 255) / 256 * 256; return 0; }
int cuLaunchKernel(void) { launches++; return 0; }
int cuGetErrorName(int r, const char **s) { *s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE"; return 0; }
int weft_fake_launches(void) { return launches; }
#ifndef END_CAPTURE_RESULT
#define END_CAPTURE_RESULT 0
#endif
int cuStreamEndCapture(void *s, void **g) { *g = (void *)0x1; return END_CAPTURE_RESULT; }
int cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) { *e = (void *)0x2; return 0; }
`

const fakeBLASSrc = `
int cublasGetVersion_v2(void *h, int *v) { *v = 130100; return 0; }
`

// buildFake compiles a shared library named name into dir exporting every
// symbol in syms (those not in src return 0).
func buildFake(t *testing.T, dir, name, src string, syms []string, defs ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(src)
	for _, s := range syms {
		if !strings.Contains(src, " "+s+"(") {
			fmt.Fprintf(&b, "int %s(void) { return 0; }\n", s)
		}
	}
	c := filepath.Join(t.TempDir(), "fake.c")
	if err := os.WriteFile(c, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-shared", "-fPIC", "-o", filepath.Join(dir, name), c}, defs...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
}
