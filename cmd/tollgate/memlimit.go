package main

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of the container's memory limit that
// becomes the Go runtime's soft memory limit: the rest is left to what the
// runtime does not count (the binary's pages, thread stacks, the kernel's
// socket buffers charged to the container).
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// memoryLimitRatio of the memory limit provider reports: by default the
// cgroup's (memory.max in cgroup v2, memory.limit_in_bytes in v1), so that
// a gateway in a container with a memory limit collects garbage before the
// kernel kills it, instead of letting its heap grow to twice what is live.
// GOMEMLIMIT in the environment wins, and AUTOMEMLIMIT=off turns it off
// (AUTOMEMLIMIT=0.8 sets another ratio): github.com/KimMachineGun/automemlimit.
// With no limit to follow the runtime's limit stays unset. It returns the
// limit in bytes, 0 when there is none; an unreadable cgroup is logged and
// leaves the limit unset. Under a limit, the collector's target
// (setGCPercent) rises too.
func setMemoryLimit(log *slog.Logger, provider memlimit.Provider) int64 {
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(provider))
	switch {
	case err != nil && !errors.Is(err, memlimit.ErrNoLimit):
		log.Warn("memory limit: could not read the container's; the Go runtime has none", "err", err)
		return 0
	case limit <= 0 || limit == math.MaxInt64:
		return 0
	}
	source := "container"
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		source = "GOMEMLIMIT=" + v
	}
	log.Info("memory limit", "bytes", limit, "mib", limit>>20, "source", source, "gogc", setGCPercent())
	return limit
}

// gcPercentUnderLimit is the collector's target (GOGC) when the runtime has
// a memory limit: the heap may grow to three times what is live before a
// collection, not twice, and the limit, not GOGC, bounds it. On
// `loadgen -mode short` (BENCHMARKS.md, stop 32) it took the gateway's CPU
// per request down by about 5%.
const gcPercentUnderLimit = 200

// setGCPercent sets GOGC to gcPercentUnderLimit unless GOGC is in the
// environment, which wins (GOGC=100 is the runtime's default; an empty one
// is no setting, as the runtime reads it); it returns
// the GOGC in force. Only setMemoryLimit calls it, once a limit is set:
// without one a higher GOGC would let the heap grow unbounded by anything
// but the machine.
func setGCPercent() string {
	if v := os.Getenv("GOGC"); v != "" {
		return v
	}
	debug.SetGCPercent(gcPercentUnderLimit)
	return strconv.Itoa(gcPercentUnderLimit)
}
