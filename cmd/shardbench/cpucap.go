package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cpuCap is a control group that caps the CPU of the processes in it
// (-pg-cores): each Postgres instance gets a budget of its own, as if
// each shard ran on a machine of that size, so that the shards' wall-clock
// scaling can be seen on a machine whose cores they would otherwise share.
// It uses the cpu controller of cgroup v1 (/sys/fs/cgroup/cpu) or of
// cgroup v2 (/sys/fs/cgroup), whichever the machine mounts; the CFS
// bandwidth settings are the kernel's (Documentation/scheduler/sched-bwc.rst).
type cpuCap struct {
	dir string
	v2  bool
}

const cfsPeriodMicros = 100_000

// newCPUCap creates the group name capped at cores CPUs. It returns an
// error when no cpu controller is writable (not root, or no cgroup mount).
func newCPUCap(name string, cores float64) (*cpuCap, error) {
	if cores <= 0 {
		return nil, fmt.Errorf("cpu cap must be positive, not %g", cores)
	}
	quota := int64(cores * cfsPeriodMicros)
	c := &cpuCap{}
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		c.dir = filepath.Join("/sys/fs/cgroup/cpu", name)
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(b), "cpu") {
		c.dir, c.v2 = filepath.Join("/sys/fs/cgroup", name), true
	} else {
		return nil, errors.New("no cgroup cpu controller (v1 /sys/fs/cgroup/cpu, or v2 with cpu in subtree_control)")
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cpu cap: %w", err)
	}
	var err error
	if c.v2 {
		err = c.write("cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriodMicros))
	} else if err = c.write("cpu.cfs_period_us", strconv.Itoa(cfsPeriodMicros)); err == nil {
		err = c.write("cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	if err != nil {
		_ = os.Remove(c.dir)
		return nil, err
	}
	return c, nil
}

func (c *cpuCap) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cpu cap %s: %w", file, err)
	}
	return nil
}

// add moves a process, and every process it has started, into the group;
// the processes it starts later are born in it.
func (c *cpuCap) add(pid int) error {
	pids := []int{pid}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, err := readProcStat(child); err == nil && st.ppid == pid {
			pids = append(pids, child)
		}
	}
	for i, p := range pids {
		err := c.write("cgroup.procs", strconv.Itoa(p))
		if err != nil && (i == 0 || !errors.Is(err, syscall.ESRCH)) { // a child may exit meanwhile
			return err
		}
	}
	return nil
}

// throttle returns the CFS periods elapsed and those in which the group
// was throttled (ran out of its quota), from cpu.stat.
func (c *cpuCap) throttle() (periods, throttled int64) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	return parseCPUStat(string(b))
}

// parseCPUStat reads nr_periods and nr_throttled from a cpu.stat file
// (the same keys in cgroup v1 and v2).
func parseCPUStat(s string) (periods, throttled int64) {
	for _, l := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(l, " ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		}
	}
	return periods, throttled
}

// remove deletes the group (its processes must have exited).
func (c *cpuCap) remove() error {
	if err := os.Remove(c.dir); err != nil {
		return fmt.Errorf("cpu cap: %w", err)
	}
	return nil
}
