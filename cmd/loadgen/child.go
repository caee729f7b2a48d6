package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// child is a process loadgen started.
type child struct {
	name string
	cmd  *exec.Cmd
	pid  int
	log  string
	done chan struct{} // closed when it exited
	err  error
}

// startChild starts bin with args and env, its stdout and stderr in
// dir/name.log. It dies with loadgen (PR_SET_PDEATHSIG), and inherits
// loadgen's RLIMIT_NOFILE.
func startChild(name, dir, bin string, args, env []string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (c *child) stop(grace time.Duration) {
	if c == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail is the end of the child's log, for error messages.
func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// freeAddr returns a loopback address with a free port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// moduleRoot finds the tollgate module's directory from the working
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/tollgate-dev/tollgate\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the tollgate module is not in the working directory or above it: run from the repository, or give -sim-bin and -tollgate-bin")
		}
		dir = parent
	}
}

// build compiles ./cmd/<name> of the module into dir.
func build(ctx context.Context, root, dir, name string) (string, error) {
	return buildPackage(ctx, root, dir, name, "./cmd/"+name)
}

// buildPackage compiles the main package pkg, as the module at root
// requires it, into dir/name.
func buildPackage(ctx context.Context, root, dir, name, pkg string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// waitHTTP polls url until it answers (any status) or c exits.
func waitHTTP(ctx context.Context, c *child, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if c != nil {
			select {
			case <-c.done:
				return fmt.Errorf("%s exited (%v); its log:\n%s", c.name, c.err, c.tail())
			default:
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer at %s within %v", c.name, url, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
