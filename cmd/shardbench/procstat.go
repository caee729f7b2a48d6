package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPU time from Linux's /proc (proc(5)). Times are in clock ticks of
// USER_HZ, which is 100 a second on Linux whatever the kernel's HZ.
const ticksPerSecond = 100

// procStat is what the benchmark reads of /proc/PID/stat.
type procStat struct {
	ppid int
	// self is utime+stime of the process; children is cutime+cstime, the
	// CPU time of its children that it has waited for (a postmaster's
	// exited backends).
	self, children int64
}

// parseProcStat parses the content of /proc/PID/stat. The command name
// (field 2) may hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return procStat{}, fmt.Errorf("proc stat: no command name in %.40q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("proc stat: %d fields after the command name, want at least 15", len(f))
	}
	var v [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} {
		n, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat field %d: %w", idx+3, err)
		}
		v[k] = n
	}
	return procStat{ppid: int(v[0]), self: v[1] + v[2], children: v[3] + v[4]}, nil
}

// readProcStat reads /proc/PID/stat; a process gone reads as an error.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// processTicks is the CPU ticks of one process (0 once it is gone).
func processTicks(pid int) int64 {
	st, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	return st.self
}

// treeTicks is the CPU ticks of a process, the children it has reaped,
// and its children still running: for a postmaster, every process of the
// Postgres instance, backends and background processes, including the
// backends that exited since it started. It only grows.
func treeTicks(pid int) int64 {
	root, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	total := root.self + root.children
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil || child == pid {
			continue
		}
		if st, err := readProcStat(child); err == nil && st.ppid == pid {
			total += st.self
		}
	}
	return total
}

// parseMachineStat returns the busy and total ticks of all CPUs from the
// content of /proc/stat (its first line); idle and iowait are not busy,
// guest time is already in user time.
func parseMachineStat(s string) (busy, total int64, err error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("proc stat: first line %.60q is not the cpu line", line)
	}
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc stat cpu field %d: %w", i+1, err)
		}
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total, nil
}

func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	busy, total, _ = parseMachineStat(string(b))
	return busy, total
}

// parseLoadavg returns the 1-minute load average from /proc/loadavg.
func parseLoadavg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, fmt.Errorf("loadavg: %.40q has fewer than 3 fields", s)
	}
	return strconv.ParseFloat(f[0], 64)
}

// loadavg1 is the machine's 1-minute load average (-1 if unreadable).
func loadavg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	l, err := parseLoadavg(string(b))
	if err != nil {
		return -1
	}
	return l
}
