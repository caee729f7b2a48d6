package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgInstance is a private Postgres server: initdb'd into a temporary
// directory of its own, listening on its own port (and a socket in that
// directory), run as the postgres OS user when the benchmark runs as root
// (initdb and postgres refuse root). It never touches the machine's own
// server. Its settings are initdb's defaults, as on the machine's server
// that `make bench-meter` measures: fsync on, synchronous_commit on,
// shared_buffers 128MB.
type pgInstance struct {
	name string
	bin  string // directory with initdb and postgres
	dir  string // the instance's temporary directory: data/, postgres.log
	port int
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{}
	cap  *cpuCap // nil: uncapped
}

// newPG initdb's an instance in a new temporary directory. bin is the
// directory of the server binaries (initdb, postgres).
func newPG(ctx context.Context, name, bin string) (*pgInstance, error) {
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("no initdb in %s (set -pgbin): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "tollgate-shardbench-"+name+"-")
	if err != nil {
		return nil, err
	}
	p := &pgInstance{name: name, bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and initdb refuses root: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if p.port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := p.command(ctx, "initdb", "-D", p.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: initdb: %w\n%s", name, err, out)
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *pgInstance) data() string { return filepath.Join(p.dir, "data") }

// command is one of the server binaries, run as the instance's owner.
func (p *pgInstance) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGDATA=")
	// Its own process group, so that a Ctrl-C at the terminal reaches the
	// benchmark alone, which then shuts the server down in order;
	// SIGQUIT (immediate shutdown) if the benchmark dies without doing so.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// start runs postgres as a child process and waits until it accepts
// connections (60 s at most).
func (p *pgInstance) start(ctx context.Context) error {
	log, err := os.Create(filepath.Join(p.dir, "postgres.log"))
	if err != nil {
		return err
	}
	// Not CommandContext: the server is stopped by stop, in order.
	p.cmd = p.command(context.Background(), "postgres", "-D", p.data(), "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("%s: start postgres: %w", p.name, err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); log.Close(); close(p.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, p.url("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s: postgres exited; see %s", p.name, log.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: postgres not ready after 60s: %w", p.name, err)
		}
	}
}

// pid is the postmaster's process id (0 when not started).
func (p *pgInstance) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// url is the URL of database db on the instance.
func (p *pgInstance) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// stop shuts the server down: fast shutdown (SIGINT: clients are
// disconnected, a checkpoint is written), immediate (SIGQUIT) after 30 s,
// SIGKILL after 10 more. Safe on a server never started or already stopped.
func (p *pgInstance) stop() {
	if p.done == nil {
		return
	}
	for _, s := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, 30 * time.Second}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, 10 * time.Second}} {
		_ = p.cmd.Process.Signal(s.sig)
		select {
		case <-p.done:
			return
		case <-time.After(s.wait):
		}
	}
}

// limit caps the instance's CPU at cores CPUs (see cpuCap): the
// postmaster and its processes move into a control group of their own.
func (p *pgInstance) limit(cores float64) error {
	c, err := newCPUCap(fmt.Sprintf("tollgate-shardbench-%d-%s", os.Getpid(), p.name), cores)
	if err != nil {
		return err
	}
	p.cap = c
	return c.add(p.pid())
}

// destroy stops the server, removes its control group (once its processes
// are gone) and its directory.
func (p *pgInstance) destroy() error {
	p.stop()
	var err error
	if p.cap != nil {
		for range 50 {
			if err = p.cap.remove(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

// exec runs SQL on the instance's postgres database (CREATE DATABASE and
// DROP DATABASE cannot run inside another database's transaction).
func (p *pgInstance) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %s: %w", p.name, strings.Fields(sql)[0], err)
	}
	return nil
}
