package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// procUse is what /proc says of a process: resident memory, OS threads and
// open file descriptors (connections included). Goroutine counts are on
// each process's /metrics (go_goroutines), but the suite gives its
// processes random admin ports, so the soak reads /proc.
type procUse struct {
	rssKB, threads, fds int64
}

func procUsage(pid int) procUse {
	var u procUse
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.rssKB = n
		case "Threads":
			u.threads = n
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = int64(len(ents))
	}
	return u
}

// soak runs a steady load for d, sampling the processes every interval,
// then checks the ledger like the fault run does. It fails when a
// gateway's or meter's memory grows by more than half, or its descriptors
// by more than half and 20, from the baseline sample (at 2 minutes, or a
// quarter of a shorter run) to the end.
func (s *stack) soak(ctx context.Context, d time.Duration, rate float64, conc int, every time.Duration) bool {
	watched := append([]*proc{s.gw}, s.meters...)
	watched = append(watched, s.nats, s.admin, s.sim)
	type sample struct {
		at   time.Duration
		sent int64
		u    []procUse
	}
	take := func(at time.Duration, sent int64) sample {
		sm := sample{at: at, sent: sent}
		for _, p := range watched {
			sm.u = append(sm.u, procUsage(p.pid()))
		}
		return sm
	}
	logf("soak: %s at %.0f requests/s, sampling every %s", d, rate, every)
	r := s.loader.start(-1, rate, conc, steadyMix)
	defer context.AfterFunc(ctx, r.stop)()
	start := time.Now()
	samples := []sample{take(0, 0)}
	tick := time.NewTicker(every)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			sm := take(time.Since(start), r.sent.Load())
			samples = append(samples, sm)
			logf("  %s: %d sent; gateway %d kB RSS, %d threads, %d fds", sm.at.Round(time.Second), sm.sent,
				sm.u[0].rssKB, sm.u[0].threads, sm.u[0].fds)
			done = time.Since(start) >= d
		}
	}
	tick.Stop()
	r.stop()
	<-r.done
	if ctx.Err() != nil {
		return false
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "t\tsent\t")
	for _, p := range watched {
		fmt.Fprintf(w, "%s RSS kB\tthr\tfds\t", p.name)
	}
	fmt.Fprintln(w)
	for _, sm := range samples {
		fmt.Fprintf(w, "%s\t%d\t", sm.at.Round(time.Second), sm.sent)
		for _, u := range sm.u {
			fmt.Fprintf(w, "%d\t%d\t%d\t", u.rssKB, u.threads, u.fds)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	base := samples[len(samples)-1]
	for _, sm := range samples {
		if sm.at >= min(2*time.Minute, d/4) {
			base = sm
			break
		}
	}
	end := samples[len(samples)-1]
	ok := true
	for i, p := range watched[:1+len(s.meters)] {
		b, e := base.u[i], end.u[i]
		grew := e.rssKB*2 > b.rssKB*3 || (e.fds*2 > b.fds*3 && e.fds > b.fds+20)
		verdict := "flat"
		if grew {
			verdict, ok = "GREW", false
		}
		fmt.Printf("%s %s: RSS %d -> %d kB, threads %d -> %d, fds %d -> %d (from %s to %s)\n", verdict, p.name,
			b.rssKB, e.rssKB, b.threads, e.threads, b.fds, e.fds, base.at.Round(time.Second), end.at.Round(time.Second))
	}
	fmt.Printf("%d requests (%d without a complete answer): %s\n\n", r.sent.Load(), r.failed.Load(), r.statusSummary())
	return s.report(ctx, nil, r) && ok
}
