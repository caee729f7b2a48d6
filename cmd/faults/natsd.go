package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// natsdMain is `faults natsd -dir D -listen HOST:PORT`: a standalone
// JetStream server, the one Tollgate embeds (same nats-server version), in
// a process of its own that the suite can kill.
func natsdMain(args []string) int {
	fs := flag.NewFlagSet("natsd", flag.ContinueOnError)
	dir := fs.String("dir", "", "JetStream storage directory")
	listen := fs.String("listen", "127.0.0.1:4222", "client address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ns, err := meter.StartEmbedded(*dir, *listen, meter.SyncPolicy{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		return 1
	}
	fmt.Println("natsd ready on", ns.ClientURL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

// startNATS starts the natsd process on the stack's address and storage.
func (s *stack) startNATS(ctx context.Context) error {
	p, err := s.ps.start("natsd", nil, s.self, "natsd", "-dir", s.natsDir, "-listen", s.natsAddr)
	if err != nil {
		return err
	}
	s.nats = p
	return p.waitLog(ctx, "natsd ready", 20*time.Second)
}

// consumer is what the suite reads of the meter's durable consumer.
type consumer struct {
	pending, ackPending uint64
	// redelivered counts deliveries beyond the first of each message: the
	// consumer's delivery sequence minus the stream sequence delivered.
	redelivered int64
}

// connectNATS opens the suite's own connection, for consumer queries.
func (s *stack) connectNATS() error {
	nc, err := nats.Connect("nats://"+s.natsAddr, nats.Name("faults"), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(200*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return err
	}
	s.nc = nc
	s.js, err = jetstream.New(nc)
	return err
}

// consumerInfo reads the meter's consumer (NATS must be up).
func (s *stack) consumerInfo(ctx context.Context) (consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := s.js.Consumer(ctx, "TOLLGATE_USAGE", "tollgate-meter")
	if err != nil {
		return consumer{}, err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return consumer{}, err
	}
	return consumer{pending: ci.NumPending, ackPending: uint64(ci.NumAckPending),
		redelivered: int64(ci.Delivered.Consumer) - int64(ci.Delivered.Stream)}, nil
}
