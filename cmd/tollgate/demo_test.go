package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeDemoUsageIsTheCustomersTotal: demo reuses its customer across
// runs, so the usage query it prints totals every run's requests; README
// said its output showed "that request's" tokens and cost, true only on a
// first `make run` (a user's walkthrough).
func TestReadmeDemoUsageIsTheCustomersTotal(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## What `make run` does")
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "second `make run` the demo customer is reused") || !strings.Contains(section, "running total") {
		t.Errorf("README's make run section does not say that a second run's usage query shows the demo customer's running total")
	}
}
