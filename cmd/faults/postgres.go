package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// pgCluster is a private Postgres cluster: initdb'd from the installed
// server binaries into a temporary directory, on a random port, with its
// socket in that directory. It never touches the machine's own server.
type pgCluster struct {
	bin  string // directory with initdb, pg_ctl, postgres
	dir  string // the cluster's temporary directory
	port int
	cred *syscall.Credential // run as this user (initdb refuses root)
}

// pgBinDir finds the server binaries: `pg_config --bindir` when it has
// initdb, else the newest /usr/lib/postgresql/*/bin.
func pgBinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no Postgres server binaries: neither pg_config --bindir nor /usr/lib/postgresql/*/bin has initdb")
}

// newPG initdb's a cluster. As root, the cluster belongs to the postgres
// OS user and every server command runs as that user.
func newPG(ctx context.Context) (*pgCluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tollgate-faults-pg-")
	if err != nil {
		return nil, err
	}
	p := &pgCluster{bin: bin, dir: dir}
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
	addr, err := freeAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	p.port, _ = strconv.Atoi(port)
	if err := p.run(ctx, "initdb", "-D", p.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

func (p *pgCluster) data() string { return filepath.Join(p.dir, "data") }

// URL is the tollgate database's URL (the ledger creates the database).
func (p *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/tollgate?sslmode=disable", p.port)
}

// run runs one of the server binaries as the cluster's owner.
func (p *pgCluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGDATA=")
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// start starts the server and waits until it accepts connections. fsync
// is off: the suite's Postgres faults are stops, never power cuts.
func (p *pgCluster) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "+
		"-c full_page_writes=off -c max_connections=100", p.port, p.dir)
	return p.run(ctx, "pg_ctl", "-D", p.data(), "-l", filepath.Join(p.dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start")
}

// stop shuts the server down (fast: clients are disconnected).
func (p *pgCluster) stop(ctx context.Context) error {
	return p.run(ctx, "pg_ctl", "-D", p.data(), "-m", "fast", "-w", "-t", "60", "stop")
}

// destroy stops the server if it runs and removes the cluster.
func (p *pgCluster) destroy() {
	_ = p.run(context.Background(), "pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "-t", "30", "stop")
	_ = os.RemoveAll(p.dir)
}
