package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"addr":                   "WEFT_ADDR",
		"auth-token":             "WEFT_AUTH_TOKEN",
		"gpu-memory-utilization": "WEFT_GPU_MEMORY_UTILIZATION",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// envFlags is a small flag set of each kind serve uses.
type envFlags struct {
	Addr  string
	Seqs  int
	Drain time.Duration
	KV    int64
	Debug bool
}

func newEnvFlags() (*flag.FlagSet, *envFlags) {
	var v envFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	fs.StringVar(&v.Addr, "addr", "127.0.0.1:1", "address")
	fs.IntVar(&v.Seqs, "max-seqs", 0, "seqs")
	fs.DurationVar(&v.Drain, "drain-timeout", time.Second, "drain")
	fs.Var(byteSize{&v.KV}, "kv-memory", "bytes")
	fs.BoolVar(&v.Debug, "debug", false, "debug")
	return fs, &v
}

func TestParseWithEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    envFlags
		wantErr string // substring; "" for none
	}{
		{name: "defaults", want: envFlags{Addr: "127.0.0.1:1", Drain: time.Second}},
		{
			name: "env sets every kind",
			env: map[string]string{"WEFT_ADDR": "0.0.0.0:50051", "WEFT_MAX_SEQS": "8", "WEFT_DRAIN_TIMEOUT": "40s",
				"WEFT_KV_MEMORY": "2MiB", "WEFT_DEBUG": "true", "OTHER_ADDR": "x"},
			want: envFlags{Addr: "0.0.0.0:50051", Seqs: 8, Drain: 40 * time.Second, KV: 2 << 20, Debug: true},
		},
		{
			name: "flag wins over env",
			args: []string{"--addr", "127.0.0.1:2", "--max-seqs=3"},
			env:  map[string]string{"WEFT_ADDR": "0.0.0.0:50051", "WEFT_MAX_SEQS": "8", "WEFT_DRAIN_TIMEOUT": "5s"},
			want: envFlags{Addr: "127.0.0.1:2", Seqs: 3, Drain: 5 * time.Second},
		},
		{
			name: "flag wins even when set to its default",
			args: []string{"--addr", "127.0.0.1:1"},
			env:  map[string]string{"WEFT_ADDR": "0.0.0.0:50051"},
			want: envFlags{Addr: "127.0.0.1:1", Drain: time.Second},
		},
		{
			name: "empty env value is a value",
			env:  map[string]string{"WEFT_ADDR": ""},
			want: envFlags{Drain: time.Second},
		},
		{name: "bad int", env: map[string]string{"WEFT_MAX_SEQS": "many"}, wantErr: `WEFT_MAX_SEQS="many" (--max-seqs)`},
		{name: "bad duration", env: map[string]string{"WEFT_DRAIN_TIMEOUT": "40"}, wantErr: `WEFT_DRAIN_TIMEOUT="40" (--drain-timeout)`},
		{name: "bad size", env: map[string]string{"WEFT_KV_MEMORY": "lots"}, wantErr: `WEFT_KV_MEMORY="lots" (--kv-memory)`},
		{name: "bad flag value not hidden by env", args: []string{"--max-seqs", "x"}, wantErr: "invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, got := newEnvFlags()
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			err := parseWithEnv(fs, tc.args, lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvUsageListsVariables(t *testing.T) {
	fs, _ := newEnvFlags()
	var out bytes.Buffer
	fs.SetOutput(&out)
	if err := parseWithEnv(fs, []string{"-h"}, func(string) (string, bool) { return "", false }); err != flag.ErrHelp {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"--addr string", "environment: WEFT_ADDR", "environment: WEFT_MAX_SEQS",
		"environment: WEFT_DRAIN_TIMEOUT", "environment: WEFT_KV_MEMORY", "(default 127.0.0.1:1)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

// TestServeFlagsFromEnv runs serve's real flag set against the process
// environment: every serve flag has its variable, and the flag wins.
func TestServeFlagsFromEnv(t *testing.T) {
	t.Setenv("WEFT_ADDR", "0.0.0.0:50051")
	t.Setenv("WEFT_AUTH_TOKEN", "s3cret")
	t.Setenv("WEFT_KV_MEMORY", "256MiB")
	t.Setenv("WEFT_DRAIN_TIMEOUT", "40s")
	t.Setenv("WEFT_BACKEND", "cuda")
	c, err := parseServeFlags([]string{"--backend", "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Addr, c.AuthToken, c.KVMemory, c.DrainTimeout, c.Backend}
	want := []any{"0.0.0.0:50051", "s3cret", int64(256 << 20), 40 * time.Second, "cpu"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("serve config (-want +got):\n%s", diff)
	}

	t.Setenv("WEFT_MAX_SEQS", "-")
	if _, err := parseServeFlags(nil); err == nil || !strings.Contains(err.Error(), "WEFT_MAX_SEQS") {
		t.Errorf("bad WEFT_MAX_SEQS: err = %v, want one naming the variable", err)
	}
	t.Setenv("WEFT_MAX_SEQS", "")
	t.Setenv("WEFT_BATCHING", "sometimes")
	if _, err := parseServeFlags([]string{"--max-seqs", "1"}); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("WEFT_BATCHING=sometimes: err = %v, want validate's error", err)
	}
}
