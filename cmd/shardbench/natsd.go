package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// natsdMain is `shardbench natsd -dir D`: the JetStream server Tollgate
// embeds (meter.StartEmbedded, its default sync policy), in a process of
// its own so that its CPU time is measured apart. It prints its client URL
// and serves until SIGTERM or SIGINT.
func natsdMain(args []string) int {
	fs := flag.NewFlagSet("natsd", flag.ContinueOnError)
	dir := fs.String("dir", "", "JetStream storage directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "natsd: -dir is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ns, err := meter.StartEmbedded(*dir, "127.0.0.1:0", meter.SyncPolicy{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		return 1
	}
	fmt.Println(ns.ClientURL())
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

// natsProc is the natsd child process.
type natsProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startNATS re-executes this binary as `natsd` with its storage in dir.
func startNATS(dir string) (*natsProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "natsd", "-dir", dir)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start natsd: %w", err)
	}
	n := &natsProc{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		lines <- l
	}()
	go func() { _ = cmd.Wait(); close(n.done) }()
	select {
	case l := <-lines:
		if n.url = strings.TrimSpace(l); n.url == "" {
			n.stop()
			return nil, fmt.Errorf("natsd exited before printing its URL")
		}
		return n, nil
	case <-time.After(20 * time.Second):
		n.stop()
		return nil, fmt.Errorf("natsd not ready after 20s")
	}
}

func (n *natsProc) pid() int { return n.cmd.Process.Pid }

// stop sends SIGTERM and waits up to 10 s, then kills.
func (n *natsProc) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}
