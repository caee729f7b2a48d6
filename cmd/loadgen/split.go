package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// The other processes of tollgate-split, as CPU roles: its nats-server,
// `tollgate meter` and `tollgate admin`. The target's own role is the
// `tollgate gateway` process, so that its CPU per chunk is the gateway's
// alone, as deployed by docker-compose.yaml; these show what metering
// costs beside it.
const (
	splitNATS  = "split-nats"
	splitMeter = "split-meter"
	splitAdmin = "split-admin"
)

// splitProcs are tollgate-split's processes besides its gateway.
type splitProcs struct {
	nats, meter, admin *child
}

// role is the process of a split-* role; nil for another name or a nil s.
func (s *splitProcs) role(name string) *child {
	if s == nil {
		return nil
	}
	switch name {
	case splitNATS:
		return s.nats
	case splitMeter:
		return s.meter
	case splitAdmin:
		return s.admin
	}
	return nil
}

// stop stops the admin and the meter, then the NATS server.
func (s *splitProcs) stop() {
	if s == nil {
		return
	}
	s.admin.stop(10 * time.Second)
	s.meter.stop(20 * time.Second)
	s.nats.stop(10 * time.Second)
}

// startSplit starts tollgate-split: a nats-server with JetStream as
// deploy/nats.conf configures it (sync_interval 100ms, what the embedded
// server of `tollgate serve` uses; -nats-bin, or built from the version
// of the module, which is the embedded server's), `tollgate migrate`, then `tollgate
// admin`, `tollgate meter` and `tollgate gateway` on it with env (which
// holds the database and the admin token); g's admin URL is the admin
// process's. The gateway alone gets the run's -memory-limit or memory
// cgroup, as `tollgate serve` does.
func (s *stack) startSplit(ctx context.Context, g *gatewayProc, bin, cfgPath string, env []string) error {
	s.split = &splitProcs{}
	natsBin := s.natsBin
	if natsBin == "" {
		// The NATS server tollgate serve embeds: the module's version.
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		fmt.Fprintln(s.log, "building nats-server (the module's github.com/nats-io/nats-server/v2)...")
		if natsBin, err = buildPackage(ctx, root, s.dir, "nats-server", "github.com/nats-io/nats-server/v2"); err != nil {
			return err
		}
	}
	natsURL, err := "", error(nil)
	if s.split.nats, natsURL, err = startNATSServer(ctx, s.dir, natsBin, splitNATS, "100ms"); err != nil {
		return err
	}
	env = append(env, "TOLLGATE_NATS_URL="+natsURL)
	mig := exec.CommandContext(ctx, bin, "migrate")
	mig.Env = env
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("tollgate migrate: %v\n%s", err, out)
	}
	for _, role := range []string{"admin", "meter", "gateway"} {
		listen, err := freeAddr()
		if err != nil {
			return err
		}
		ops, err := freeAddr()
		if err != nil {
			return err
		}
		renv := append(append([]string{}, env...), "TOLLGATE_LISTEN="+listen, "TOLLGATE_ADMIN_LISTEN="+ops,
			"TOLLGATE_DATA_DIR="+filepath.Join(s.dir, g.target+"-"+role+"-data"))
		args := []string{role, "--config", cfgPath}
		var c *child
		if role == "gateway" {
			c, err = s.start(g.target, bin, args, s.withMemoryLimit(renv))
		} else {
			c, err = startChild("split-"+role, s.dir, bin, args, renv)
		}
		if err != nil {
			return err
		}
		switch role {
		case "admin":
			s.split.admin, g.adminURL = c, "http://"+ops
		case "meter":
			s.split.meter = c
		case "gateway":
			g.child, g.url = c, "http://"+listen
		}
		if err := waitHTTP(ctx, c, "http://"+ops+"/healthz", 60*time.Second); err != nil {
			return err
		}
	}
	return waitHTTP(ctx, g.child, g.url+"/healthz", 10*time.Second)
}

// natsBinary is bin, or nats-server on PATH, else /usr/sbin/nats-server.
func natsBinary(bin string) string {
	if bin != "" {
		return bin
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	return "/usr/sbin/nats-server"
}

// startNATSServer starts bin as a JetStream server on a free loopback
// port, its store in dir/name, with the JetStream sync_interval given
// (deploy/nats.conf's 100ms; "" for the server's default, which servers
// before 2.10 need), and waits until it takes connections. It returns the
// child and its URL.
func startNATSServer(ctx context.Context, dir, bin, name, syncInterval string) (*child, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	host, port, _ := strings.Cut(addr, ":")
	conf := filepath.Join(dir, name+".conf")
	sync := ""
	if syncInterval != "" {
		sync = "\n  sync_interval: " + syncInterval
	}
	text := fmt.Sprintf("host: %q\nport: %s\njetstream {\n  store_dir: %q%s\n}\n", host, port, filepath.Join(dir, name), sync)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, "", err
	}
	c, err := startChild(name, dir, bin, []string{"-c", conf}, os.Environ())
	if err != nil {
		return nil, "", err
	}
	u := "nats://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := nats.Connect(u)
		if err == nil {
			nc.Close()
			return c, u, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(time.Second)
			return nil, "", fmt.Errorf("nats-server did not start: %v\n%s", err, c.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
