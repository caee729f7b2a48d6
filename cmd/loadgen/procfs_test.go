package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rusageCPU is this process's user+system CPU time in seconds, as
// getrusage reports it: a second source for procCPU to agree with.
func rusageCPU(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
}

// spin keeps one CPU busy for d.
func spin(d time.Duration) (n uint64) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		n++
	}
	return n
}

func TestProcCPU(t *testing.T) {
	before, err := procCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until getrusage counts 0.3 s more CPU: on a loaded machine a
	// spin of 0.3 s of wall time may get far less CPU than that.
	start := time.Now()
	for ru := rusageCPU(t); rusageCPU(t) < ru+0.3; {
		spin(10 * time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	after, err := procCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	// The spin is 0.3 s of CPU (less a 10 ms tick either side), and no more
	// than every CPU for the whole time (plus a tick either side).
	if d := after - before; d < 0.28 || d > elapsed*float64(runtime.NumCPU())+0.02 {
		t.Errorf("CPU over a spin of 0.3 s of CPU (%.2f s of wall time): %.2f s", elapsed, d)
	}
	// getrusage counts the same time in finer units than the 10 ms ticks.
	if ru := rusageCPU(t); after > ru+0.05 || after < ru-0.05 {
		t.Errorf("procCPU(self) = %.2f s, getrusage says %.3f s", after, ru)
	}
	if byPID, err := procCPU(os.Getpid()); err != nil || byPID < after {
		t.Errorf("procCPU(own pid) = %v, %v; want at least %v", byPID, err, after)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("a pid that does not exist must be an error")
	}
}

func TestProcMemAndFDs(t *testing.T) {
	debug.FreeOSMemory() // so that the next allocation is not already resident
	rss0, hwm0, err := procMem(os.Getpid())
	if err != nil || rss0 < 1<<20 || rss0 > 4<<30 || hwm0 < rss0 {
		t.Fatalf("procMem(self) = RSS %d, peak %d, %v", rss0, hwm0, err)
	}
	// 64 MiB touched page by page is resident.
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	rss, hwm, err := procMem(os.Getpid())
	if err != nil || rss-rss0 < 60<<20 || hwm < rss {
		t.Errorf("after touching 64 MiB: RSS %d MiB (was %d), peak %d MiB, %v", rss>>20, rss0>>20, hwm>>20, err)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil && (hwm < ru.Maxrss<<10-8<<20 || hwm > ru.Maxrss<<10+8<<20) {
		t.Errorf("peak RSS %d MiB, getrusage says %d MiB", hwm>>20, ru.Maxrss>>10)
	}
	runtime.KeepAlive(buf)

	n0 := fdCount(os.Getpid())
	var files []*os.File
	for range 5 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if n := fdCount(os.Getpid()); n0 < 3 || n != n0+5 {
		t.Errorf("fds %d with 5 more files open, %d before", n, n0)
	}
	for _, f := range files {
		f.Close()
	}
	if n := fdCount(os.Getpid()); n != n0 {
		t.Errorf("fds %d after closing them, want %d", n, n0)
	}
	if fdCount(1<<30) != -1 {
		t.Error("fdCount of a pid that does not exist must be -1")
	}
}

func TestMachine(t *testing.T) {
	b0, t0 := machineCPU()
	start := time.Now()
	spin(200 * time.Millisecond)
	b1, t1 := machineCPU()
	if t0 <= 0 || b0 < 0 || b0 > t0 {
		t.Fatalf("machineCPU = %v busy of %v s", b0, t0)
	}
	// Every CPU's time passes, and the spin kept one of them busy.
	wall := time.Since(start).Seconds() * float64(runtime.NumCPU())
	if dt := t1 - t0; dt < wall/2 || dt > wall*1.5+0.05 {
		t.Errorf("machine CPU time %.2f s over %.2f CPU-seconds of wall time", dt, wall)
	}
	if db := b1 - b0; db < 0.1 || db > t1-t0 {
		t.Errorf("busy %.2f s of %.2f s while spinning", db, t1-t0)
	}
	if l := loadAvg(); !regexp.MustCompile(`^\d+\.\d\d \d+\.\d\d \d+\.\d\d$`).MatchString(l) {
		t.Errorf("loadAvg = %q", l)
	}
	if m := machineInfo(); !regexp.MustCompile(`^\d+ CPUs \(.+, [\d.]* MHz\), \d+\.\d GiB RAM$`).MatchString(m) {
		t.Errorf("machineInfo = %q", m)
	}
}

func TestPostgresCPU(t *testing.T) {
	for line, want := range map[string]bool{
		"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main ": true,
		"postgres: 15/main: checkpointer ":                                    true,
		"postgres: 15/main: autovacuum launcher ":                             true,
		"postgres: 15/main: postgres tollgate_x 127.0.0.1(48616) idle ":       false,
	} {
		if isPGBackground(line) != want {
			t.Errorf("isPGBackground(%q) = %v", line, !want)
		}
	}
	// On a machine with a Postgres server, its background processes have
	// used some CPU since it started.
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	if !slices.ContainsFunc(comms, func(p string) bool {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b)) == "postgres"
	}) {
		t.Skip("no postgres process visible")
	}
	if pg := postgresCPU("tollgate_loadgen_nonexistent"); pg.db != 0 || pg.bg <= 0 {
		t.Errorf("postgresCPU = %+v, want db 0 and bg > 0", pg)
	}
}
