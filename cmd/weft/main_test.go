package main

import (
	"os"
	"testing"
)

// runMainEnv set to 1 makes the test binary run as weft itself (main with
// its arguments), so a test can start `weft serve` or `weft chat` as a
// child process built exactly as the test is (-race included).
const runMainEnv = "WEFT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
