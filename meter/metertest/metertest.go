// Package metertest gives tests a real NATS server with JetStream, embedded
// in the test process with its storage in the test's temporary directory,
// shut down when the test ends; and, on it, the usage stream and running
// meter workers. KillChild is for the tests of what must survive a crash.
package metertest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// NewServer starts an embedded JetStream server on a random loopback port.
func NewServer(t testing.TB) *server.Server {
	t.Helper()
	s, err := meter.StartEmbedded(t.TempDir(), "127.0.0.1:0", meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatalf("metertest: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.Server()
}

// NewServerWith starts a NATS server with opts (a test's own settings: a
// small max_payload, no JetStream), on a random loopback port unless opts
// names one; it shuts down when the test ends.
func NewServerWith(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("metertest: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("metertest: the NATS server is not ready")
	}
	return s
}

// Connect connects to s and returns a JetStream handle; the connection
// closes when the test ends.
func Connect(t testing.TB, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("metertest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("metertest: jetstream: %v", err)
	}
	return js
}

// NewStream starts an embedded server (NewServer), connects to it
// (Connect) and creates the usage stream with the default StreamConfig
// (meter.EnsureStream): what a publisher or worker test starts from.
func NewStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js := Connect(t, NewServer(t))
	if _, err := meter.EnsureStream(context.Background(), js, meter.StreamConfig{}); err != nil {
		t.Fatalf("metertest: usage stream: %v", err)
	}
	return js
}

// EditStream changes the configuration of js's stream name as an operator
// would (say, a limit, or sealed): edit is given its configuration as it is,
// and the stream is updated with what edit leaves. It fails the test when
// the stream cannot be read or JetStream refuses the update.
func EditStream(t testing.TB, js jetstream.JetStream, name string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("metertest: stream %s: %v", name, err)
	}
	cfg := st.CachedInfo().Config
	edit(&cfg)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("metertest: update stream %s: %v", name, err)
	}
}

// StartWorker creates a meter worker of cfg on js, writing to store
// (meter.NewWorker), and runs it until ctx ends. The channel receives what
// Run returned, once. The test owns ctx: it cancels it, and waits on the
// channel when it must know the worker has stopped. When the test ends
// (its defers run), the worker must have stopped within 30 s: its
// database is dropped after, not under it.
func StartWorker(t testing.TB, ctx context.Context, js jetstream.JetStream, store meter.Store, cfg meter.WorkerConfig) <-chan error {
	t.Helper()
	w, err := meter.NewWorker(ctx, js, store, cfg)
	if err != nil {
		t.Fatalf("metertest: worker: %v", err)
	}
	done := make(chan error, 1)
	stopped := make(chan struct{})
	go func() {
		err := w.Run(ctx)
		close(stopped)
		done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Errorf("metertest: the worker did not stop within 30 s of the test's end (is its context cancelled?)")
		}
	})
	return done
}

// KillChild runs the test named test again in a child process of the test
// binary, with env ("NAME=value", which tells the child it is one) added
// to its environment, and reads the child's standard output for lines
// "<prefix>N", N being how far the child has got. Once N reaches upto, or
// the output ends, it kills the child with SIGKILL and waits for it. It
// returns the last N read, -1 when none.
func KillChild(t testing.TB, test, env, prefix string, upto int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	// Killed with the test process too: a test binary ended by its
	// -timeout panics without reaching the kill below, and a child held
	// where the kill was to land lived on, holding the test's database
	// (which its clean-up then could not drop) and its connections.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	n := -1
	// n is checked before the next line is read: a child that stops at
	// upto (held where the kill is to land) prints nothing more.
	for n < upto && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			fmt.Sscan(v, &n)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	return n
}
