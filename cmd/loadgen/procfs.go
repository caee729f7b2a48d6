package main

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
)

// procFS is /proc, opened once.
var procFS = sync.OnceValues(procfs.NewDefaultFS)

// proc is the process pid under /proc; pid 0 means this process.
func proc(pid int) (procfs.Proc, error) {
	fs, err := procFS()
	if err != nil {
		return procfs.Proc{}, err
	}
	if pid == 0 {
		return fs.Self()
	}
	return fs.Proc(pid)
}

// procCPU returns a process's user+system CPU time in seconds, from
// /proc/PID/stat (utime and stime, in USER_HZ = 100 ticks per second on
// every Linux architecture Go supports). It covers every thread of the
// process; pid 0 means this process.
func procCPU(pid int) (float64, error) {
	p, err := proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

// procMem returns VmRSS and VmHWM (peak RSS) of a process in bytes, from
// /proc/PID/status.
func procMem(pid int) (rss, hwm int64, err error) {
	p, err := proc(pid)
	if err != nil {
		return 0, 0, err
	}
	s, err := p.NewStatus()
	if err != nil {
		return 0, 0, err
	}
	return int64(s.VmRSS), int64(s.VmHWM), nil
}

// fdCount is the number of open file descriptors of a process, -1 when
// /proc does not say.
func fdCount(pid int) int {
	p, err := proc(pid)
	if err != nil {
		return -1
	}
	n, err := p.FileDescriptorsLen()
	if err != nil {
		return -1
	}
	return n
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
	fs, err := procFS()
	if err != nil {
		return out
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		if comm, err := p.Comm(); err != nil || comm != "postgres" {
			continue
		}
		args, err := p.CmdLine()
		if err != nil {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue
		}
		// A backend's title is one argument ("postgres: 15/main: user db
		// 127.0.0.1(5432) idle"); the trailing space lets a database name
		// match at the end as in the middle.
		line := strings.Join(args, " ") + " "
		switch {
		case dbName != "" && strings.Contains(line, " "+dbName+" "):
			out.db += st.CPUTime()
		case isPGBackground(line):
			out.bg += st.CPUTime()
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

// machineCPU returns the busy and total CPU seconds of all CPUs since boot
// (/proc/stat's cpu line): total is user, nice, system, idle, iowait, irq,
// softirq and steal (guest time is already in user and nice), busy all of
// them but idle and iowait.
func machineCPU() (busy, total float64) {
	fs, err := procFS()
	if err != nil {
		return 0, 0
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0
	}
	c := st.CPUTotal
	total = c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return total - c.Idle - c.Iowait, total
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures, as the kernel
// writes them (two decimals).
func loadAvg() string {
	fs, err := procFS()
	if err != nil {
		return "?"
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// machineInfo describes the machine: cores, CPU model, memory.
func machineInfo() string {
	model, mhz, mem := "?", "", "?"
	if fs, err := procFS(); err == nil {
		if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
			if cpus[0].ModelName != "" {
				model = cpus[0].ModelName
			}
			if cpus[0].CPUMHz > 0 {
				mhz = fmt.Sprintf("%.3f", cpus[0].CPUMHz) // as /proc/cpuinfo writes it
			}
		}
		if m, err := fs.Meminfo(); err == nil && m.MemTotal != nil {
			mem = fmt.Sprintf("%.1f GiB", float64(*m.MemTotal)/(1<<20)) // MemTotal is in KiB
		}
	}
	return fmt.Sprintf("%d CPUs (%s, %s MHz), %s RAM", numCPU(), model, mhz, mem)
}
