package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// withoutMemoryLimit runs the test with the runtime's limit unset, GOGC at
// the runtime's default and none of GOMEMLIMIT, AUTOMEMLIMIT and GOGC in
// the environment, and puts the limit and GOGC back after.
func withoutMemoryLimit(t *testing.T) {
	t.Helper()
	before := debug.SetMemoryLimit(math.MaxInt64)
	gogc := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(before); debug.SetGCPercent(gogc) })
	for _, k := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT", "GOGC"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
}

func TestMemoryLimitFollowsTheContainer(t *testing.T) {
	withoutMemoryLimit(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	got := setMemoryLimit(log, memlimit.Limit(1000<<20))
	if want := int64(900 << 20); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("a 1000 MiB container: limit %d, runtime's %d; want %d (90%%)", got, debug.SetMemoryLimit(-1), want)
	}
	if !strings.Contains(logs.String(), "mib=900") || !strings.Contains(logs.String(), "source=container") ||
		!strings.Contains(logs.String(), "gogc=200") {
		t.Errorf("log: %s", logs.String())
	}
	if got := gcPercent(); got != 200 {
		t.Errorf("GOGC under a limit: %d, want 200", got)
	}
}

// gcPercent reads the runtime's GOGC.
func gcPercent() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}

func TestGOGCInTheEnvironmentWins(t *testing.T) {
	withoutMemoryLimit(t)
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime reads it at start
	var logs bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), memlimit.Limit(1000<<20))
	if got := gcPercent(); got != 150 || !strings.Contains(logs.String(), "gogc=150") {
		t.Fatalf("GOGC=150 under a limit: runtime's %d; log: %s", got, logs.String())
	}
}

// TestEmptyGOGCIsNoSetting: an empty GOGC counted as set, so the runtime
// stayed at its 100 (it reads an empty GOGC as none) and the log showed
// "gogc=" with no value.
func TestEmptyGOGCIsNoSetting(t *testing.T) {
	withoutMemoryLimit(t)
	t.Setenv("GOGC", "")
	var logs bytes.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), memlimit.Limit(1000<<20))
	if got := gcPercent(); got != gcPercentUnderLimit || !strings.Contains(logs.String(), fmt.Sprintf("gogc=%d", gcPercentUnderLimit)) {
		t.Fatalf("GOGC= under a limit: runtime's %d; log: %s", got, logs.String())
	}
}

func TestMemoryLimitNoneWithoutAContainerLimit(t *testing.T) {
	withoutMemoryLimit(t)
	none := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	if got := setMemoryLimit(slog.New(slog.DiscardHandler), none); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("no container limit: %d, runtime's %d; want none", got, debug.SetMemoryLimit(-1))
	}
	if got := gcPercent(); got != 100 {
		t.Fatalf("GOGC with no limit: %d, want the runtime's 100", got)
	}
	broken := func() (uint64, error) { return 0, os.ErrPermission }
	var logs bytes.Buffer
	if got := setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), broken); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("unreadable cgroup: %d, runtime's %d; want none", got, debug.SetMemoryLimit(-1))
	}
	if !strings.Contains(logs.String(), "could not read") {
		t.Errorf("an unreadable cgroup is not logged: %s", logs.String())
	}
}

func TestMemoryLimitEnvironmentWins(t *testing.T) {
	withoutMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20) // as the runtime reads it at start
	var logs bytes.Buffer
	got := setMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), memlimit.Limit(1000<<20))
	if got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Fatalf("GOMEMLIMIT=300MiB: %d, runtime's %d", got, debug.SetMemoryLimit(-1))
	}
	if !strings.Contains(logs.String(), `source="GOMEMLIMIT=300MiB"`) {
		t.Errorf("log: %s", logs.String())
	}
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("AUTOMEMLIMIT", "off")
	if got := setMemoryLimit(slog.New(slog.DiscardHandler), memlimit.Limit(1000<<20)); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("AUTOMEMLIMIT=off: %d, runtime's %d", got, debug.SetMemoryLimit(-1))
	}
}
