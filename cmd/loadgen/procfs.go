package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clkTck is USER_HZ, the unit of /proc/PID/stat's utime and stime: 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clkTck = 100

// procCPU returns a process's user+system CPU time in seconds, from
// /proc/PID/stat (utime and stime, fields 14 and 15, in clock ticks). It
// covers every thread of the process; pid 0 means this process.
func procCPU(pid int) (float64, error) {
	p := "self"
	if pid > 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime+stime from a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may hold spaces, so fields are
// counted from the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc stat line %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime (14) is f[11], stime (15) is f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line %q", b)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc stat times %q %q", f[11], f[12])
	}
	return float64(ut+st) / clkTck, nil
}

// procMem returns VmRSS and VmHWM (peak RSS) of a process in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(val) // "12345 kB"
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// fdCount is the number of open file descriptors of a process.
func fdCount(pid int) int {
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// pgCPU is the CPU time of the local Postgres server's processes, in
// seconds: db sums the backends serving one database (their command line
// names it), bg the server's shared background processes (checkpointer,
// walwriter, background writer, autovacuum...), which work for every
// database on the server. Backends of other databases are left out. A
// backend that exits between two readings takes its CPU time with it.
type pgCPU struct{ db, bg float64 }

func postgresCPU(dbName string) pgCPU {
	var out pgCPU
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cpu, err := procCPU(pid)
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(cmd), "\x00", " ")
		switch {
		case dbName != "" && strings.Contains(line, " "+dbName+" "):
			out.db += cpu
		case isPGBackground(line):
			out.bg += cpu
		}
	}
	return out
}

// isPGBackground reports whether a postgres command line is the server or
// one of its shared background processes rather than a client backend.
func isPGBackground(line string) bool {
	if !strings.Contains(line, ": ") {
		return true // the postmaster: "/usr/lib/postgresql/15/bin/postgres -D ..."
	}
	for _, s := range []string{"checkpointer", "background writer", "walwriter", "autovacuum",
		"logical replication", "stats collector", "archiver", "walsender", "startup"} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// machineCPU returns the busy and total jiffies of all CPUs (/proc/stat).
func machineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machineInfo describes the machine: cores, CPU model, memory.
func machineInfo() string {
	model, mhz := "?", ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(line, ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if k == "model name" && model == "?" {
				model = v
			}
			if k == "cpu MHz" && mhz == "" {
				mhz = v
			}
		}
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s, %s MHz), %s RAM", numCPU(), model, mhz, mem)
}
