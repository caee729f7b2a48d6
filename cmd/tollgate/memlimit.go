package main

import (
	"errors"
	"log/slog"
	"math"
	"os"

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
// leaves the limit unset.
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
	log.Info("memory limit", "bytes", limit, "mib", limit>>20, "source", source)
	return limit
}
