package main

import (
	"strings"
	"testing"
)

// TestToolFormatFlag: --tool-format takes a toolcall format's name (case
// aside) and refuses any other before the model loads.
func TestToolFormatFlag(t *testing.T) {
	c, err := parseServeFlags([]string{"--backend", "cpu", "--tool-format", "hermes"})
	if err != nil || c.ToolFormat != "hermes" {
		t.Fatalf("--tool-format hermes: %q, %v", c.ToolFormat, err)
	}
	if _, err := parseServeFlags([]string{"--backend", "cpu", "--tool-format", "nope"}); err == nil || !strings.Contains(err.Error(), "--tool-format") {
		t.Errorf("--tool-format nope: err %v, want one naming the flag", err)
	}
}
