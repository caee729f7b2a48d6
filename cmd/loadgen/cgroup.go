package main

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A memory cgroup (-memory-cgroup) runs one child of the stack as a
// container with a memory limit would: the kernel charges the child's
// pages (heap, stacks, binary, the page cache of files it writes, socket
// buffers) to the cgroup and kills it when they cannot be kept under the
// limit. The child is started in it from its first instruction (the
// cgroup-exec trampoline below), so nothing it allocates is charged
// elsewhere. tollgate reads the limit itself (cmd/tollgate/memlimit.go,
// 90% of it as the Go runtime's soft limit); the bare proxy is given the
// same GOMEMLIMIT by loadgen.
//
// This is the few file writes the kernel's interface needs (Documentation/
// admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst), for cgroup v1's
// memory controller or a cgroup v2 hierarchy with the memory controller
// enabled for loadgen's own cgroup's children; a library such as
// containerd/cgroups would bring eBPF and D-Bus clients into the module
// for them.
type memCgroup struct {
	dir   string // the cgroup's directory
	v2    bool   // cgroup v2 (memory.max, memory.peak, memory.events) or v1
	limit int64  // bytes
}

// cgroupExec is the first argument of loadgen re-executed as a trampoline:
// `loadgen cgroup-exec PROCS BIN ARGS...` moves itself into the cgroup
// whose cgroup.procs file is PROCS, then executes BIN with ARGS in place.
const cgroupExec = "cgroup-exec"

// newMemCgroup makes a memory cgroup named name under loadgen's own, with
// a limit of limit bytes. It returns an error naming what is missing when
// the machine has no memory controller loadgen may write to.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	parent, v2, err := ownMemCgroup()
	if err != nil {
		return nil, fmt.Errorf("-memory-cgroup: %w", err)
	}
	g := &memCgroup{dir: filepath.Join(parent, name), v2: v2, limit: limit}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("-memory-cgroup: %w", err)
	}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		_ = os.Remove(g.dir)
		return nil, fmt.Errorf("-memory-cgroup: set %s: %w", file, err)
	}
	if v2 { // no swap: what does not fit is killed, as in v1 without memsw
		_ = os.WriteFile(filepath.Join(g.dir, "memory.swap.max"), []byte("0"), 0)
	}
	return g, nil
}

// ownMemCgroup returns the directory of the memory cgroup loadgen runs in,
// from /proc/self/cgroup and /proc/self/mountinfo: cgroup v1's memory
// controller when it is mounted, else the v2 hierarchy when its
// cgroup.controllers lists memory.
func ownMemCgroup() (dir string, v2 bool, err error) {
	paths := map[string]string{} // controller ("" for v2) → path
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// id parent major:minor root mount-point options ... - fstype source super-options
		pre, post, ok := strings.Cut(line, " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		root, mount := fields[3], fields[4]
		switch {
		case tail[0] == "cgroup" && hasOption(tail[2], "memory"):
			if p, ok := paths["memory"]; ok {
				return filepath.Join(mount, relCgroup(p, root)), false, nil
			}
		case tail[0] == "cgroup2":
			p, ok := paths[""]
			if !ok {
				continue
			}
			d := filepath.Join(mount, relCgroup(p, root))
			if c, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil && hasWord(string(c), "memory") {
				dir, v2 = d, true // taken unless a v1 memory controller follows
			}
		}
	}
	if dir == "" {
		return "", false, errors.New("no memory cgroup controller mounted for this process (cgroup v1 memory, or cgroup v2 with memory in cgroup.controllers)")
	}
	return dir, v2, nil
}

// relCgroup is a cgroup's path relative to the root of the mount that shows it.
func relCgroup(path, root string) string {
	if root != "/" && strings.HasPrefix(path, root) {
		return strings.TrimPrefix(path, root)
	}
	return path
}

func hasOption(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

func hasWord(s, w string) bool {
	for _, x := range strings.Fields(s) {
		if x == w {
			return true
		}
	}
	return false
}

// command returns what starts bin with args inside the cgroup: loadgen
// itself as the cgroup-exec trampoline.
func (g *memCgroup) command(bin string, args []string) (string, []string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", nil, err
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", nil, err
	}
	return self, append([]string{cgroupExec, filepath.Join(g.dir, "cgroup.procs"), path}, args...), nil
}

// cgroupExecMain is the trampoline: args are PROCS BIN ARGS... It returns
// only on an error.
func cgroupExecMain(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: loadgen cgroup-exec PROCS BIN [ARGS...]")
	}
	// "0" moves the writing process (cgroup-v1/cgroups.rst, cgroup-v2.rst).
	if err := os.WriteFile(args[0], []byte("0"), 0); err != nil {
		return fmt.Errorf("enter the memory cgroup: %w", err)
	}
	return syscall.Exec(args[1], args[1:], os.Environ())
}

// cgroupUsage is what the kernel counted in a memory cgroup.
type cgroupUsage struct {
	peak     int64 // bytes: the most ever charged (v1 max_usage_in_bytes, v2 memory.peak; -1 when the kernel keeps none)
	limitHit int64 // times a charge hit the limit (v1 failcnt, v2 events' max)
	oomKills int64 // processes killed for it (oom_kill)
}

// usage reads the cgroup's counters.
func (g *memCgroup) usage() (cgroupUsage, error) {
	u := cgroupUsage{peak: -1}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(g.dir, name))
		return string(b), err
	}
	var err error
	if g.v2 {
		if s, e := read("memory.peak"); e == nil { // Linux 5.19 and later
			u.peak, _ = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		}
		s, e := read("memory.events")
		u.limitHit, u.oomKills, err = statValue(s, "max"), statValue(s, "oom_kill"), e
		return u, err
	}
	s, e := read("memory.max_usage_in_bytes")
	if e == nil {
		u.peak, _ = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	}
	f, e2 := read("memory.failcnt")
	if e2 == nil {
		u.limitHit, _ = strconv.ParseInt(strings.TrimSpace(f), 10, 64)
	}
	o, e3 := read("memory.oom_control") // oom_kill since Linux 4.13
	u.oomKills = statValue(o, "oom_kill")
	return u, errors.Join(e, e2, e3)
}

// statValue is the value of key in a "key value" per line file, 0 when absent.
func statValue(s, key string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes the cgroup once its processes have ended.
func (g *memCgroup) remove() error { return os.Remove(g.dir) }

// cgroupMemoryRatio is the share of a memory cgroup's limit that tollgate
// makes its Go runtime's soft limit (cmd/tollgate/memlimit.go:
// memoryLimitRatio); the bare proxy is given the same.
const cgroupMemoryRatio = 0.9

// start starts a child of the stack, in a memory cgroup of its own when
// the run has -memory-cgroup.
func (s *stack) start(name, bin string, args, env []string) (*child, error) {
	if s.cgroupLimit <= 0 {
		return startChild(name, s.dir, bin, args, env)
	}
	g, err := newMemCgroup(fmt.Sprintf("loadgen-%d-%s", os.Getpid(), name), s.cgroupLimit)
	if err != nil {
		return nil, err
	}
	s.cgroups[name] = g
	cmd, cargs, err := g.command(bin, args)
	if err != nil {
		return nil, err
	}
	return startChild(name, s.dir, cmd, cargs, env)
}

// cgroupLine describes the memory cgroup of the child name: its limit and
// what the kernel counted; "" when it has none.
func (s *stack) cgroupLine(name string) string {
	g := s.cgroups[name]
	if g == nil {
		return ""
	}
	u, err := g.usage()
	if err != nil {
		return fmt.Sprintf("%s: memory cgroup %s: %v", name, g.dir, err)
	}
	peak := "not kept by this kernel"
	if u.peak >= 0 {
		peak = fmt.Sprintf("%.0f MiB", mib(u.peak))
	}
	return fmt.Sprintf("%s: memory cgroup limit %.0f MiB: peak charged %s (RSS, page cache, kernel memory), limit reached %d times, OOM kills %d",
		name, mib(g.limit), peak, u.limitHit, u.oomKills)
}

// withMemoryLimit sets GOMEMLIMIT in env to the run's -memory-limit, when
// it has one.
func (s *stack) withMemoryLimit(env []string) []string {
	if s.memoryLimit == "" {
		return env
	}
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	return append(env, "GOMEMLIMIT="+s.memoryLimit)
}

// validMemoryLimit reports whether v is a size as GOMEMLIMIT takes it: a
// number of bytes, or a number with one of the suffixes B, KiB, MiB, GiB
// or TiB (runtime/debug: "the GOMEMLIMIT environment variable").
func validMemoryLimit(v string) bool {
	_, ok := parseMemorySize(v)
	return ok
}

// parseMemorySize reads a size in GOMEMLIMIT's syntax (validMemoryLimit)
// as bytes.
func parseMemorySize(v string) (int64, bool) {
	num, unit := v, uint64(1)
	for _, u := range []struct {
		suffix string
		bytes  uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, unit = n, u.bytes
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || n == 0 || n > math.MaxInt64/unit {
		return 0, false
	}
	return int64(n * unit), true
}
