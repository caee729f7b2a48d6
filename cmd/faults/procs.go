package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the suite started, with its output in a log
// file that restarts of the same name append to.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	from int64 // size of the log when this process started
	done chan struct{}
}

// procs starts child processes and kills whatever is left of them at
// cleanup. Children also get SIGKILL if the suite itself dies
// (Pdeathsig), so a crashed run leaves no gateway or NATS behind.
type procs struct {
	dir string // log files
	mu  sync.Mutex
	all []*proc
}

// start runs bin with args and env (on top of the suite's own).
func (ps *procs) start(name string, env []string, bin string, args ...string) (*proc, error) {
	path := filepath.Join(ps.dir, name+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, _ := f.Stat()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: path, from: st.Size(), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *proc) kill9() {
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	<-p.done
}

// cleanup kills every child still running.
func (ps *procs) cleanup() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.all {
		if !p.exited() {
			p.kill9()
		}
	}
}

// waitLog waits until this process has logged a line containing s.
func (p *proc) waitLog(ctx context.Context, s string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		found := false
		_ = p.scanLog(func(line string) bool {
			found = strings.Contains(line, s)
			return !found
		})
		switch {
		case found:
			return nil
		case p.exited():
			return fmt.Errorf("%s exited before logging %q; see %s", p.name, s, p.log)
		case time.Now().After(deadline):
			return fmt.Errorf("%s did not log %q within %s; see %s", p.name, s, timeout, p.log)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// scanLog calls fn for each line this process logged, until fn is false.
func (p *proc) scanLog(fn func(string) bool) error {
	return scanFile(p.log, p.from, -1, fn)
}

// scanFile calls fn for each line of path between byte offsets from and
// to (-1: the end), until fn returns false.
func scanFile(path string, from, to int64, fn func(string) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	off := from
	for sc.Scan() {
		off += int64(len(sc.Bytes())) + 1
		if to >= 0 && off > to {
			return nil
		}
		if !fn(sc.Text()) {
			return nil
		}
	}
	return sc.Err()
}

// logSize is the current size of a log file (an offset for scanFile).
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// spoolLog counts, in a gateway's JSON log between two offsets, the usage
// events its spool took (published late: republished, or found at start).
func spoolLog(path string, from, to int64) (republished, failedPublishes int64) {
	_ = scanFile(path, from, to, func(line string) bool {
		var l struct {
			Msg  string `json:"msg"`
			What string `json:"what"` // "usage events" or "dead letters"
			Sent int64  `json:"sent"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			return true
		}
		switch {
		case l.Msg == "spool: republished" && l.What == "usage events":
			republished += l.Sent
		case l.Msg == "spool: republishing paused" && l.What == "usage events": // a round cut short still sent some
			republished += l.Sent
		case strings.HasPrefix(l.Msg, "usage event spooled"):
			failedPublishes++
		}
		return true
	})
	return republished, failedPublishes
}

// journalLog sums, in a gateway's JSON log from a byte offset on, the
// requests its restarts recorded from their crash journals.
func journalLog(path string, from int64) (requests int64) {
	_ = scanFile(path, from, -1, func(line string) bool {
		var l struct {
			Msg      string `json:"msg"`
			Requests int64  `json:"requests"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "crash journal:") {
			requests += l.Requests
		}
		return true
	})
	return requests
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitFor polls cond every 100ms until it holds, ctx ends or timeout
// passes; it returns cond's last error.
func waitFor(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if serr := sleep(ctx, 100*time.Millisecond); serr != nil {
			return errors.Join(serr, err)
		}
	}
}
