package meter_test

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

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStalledWorkerLeavesNoEventToTheAckWait: a worker whose process does
// not run for a while (a VM's pause, SIGSTOP; the meter of an all-in-one
// gateway behind 10,000 client hang-ups at once on two CPUs) is delivered
// events meanwhile. When it runs again, it writes them all at once. With a
// Fetch per batch it dropped the ones that reached the Fetch once its own
// timer (its wait plus a second) had run out too, and they waited the ack
// wait (30 s) to be delivered again.
//
// The worker runs in a child process, which the test stops (SIGSTOP)
// while it publishes events, and resumes 1.5 s later; six times.
func TestStalledWorkerLeavesNoEventToTheAckWait(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	if env := os.Getenv("TOLLGATE_STALL_CHILD"); env != "" {
		runStallChild(env)
		return
	}
	srv := metertest.NewServer(t)
	js := metertest.Connect(t, srv)
	if _, err := meter.EnsureStream(context.Background(), js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	store, dbURL := ledgertest.NewStoreURL(t)

	child := exec.Command(os.Args[0], "-test.run=^TestStalledWorkerLeavesNoEventToTheAckWait$")
	child.Env = append(os.Environ(), "TOLLGATE_STALL_CHILD="+srv.ClientURL()+" "+dbURL)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the worker's process did not start: %q", lines.Text())
	}

	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer := uuid.NewString()
	const rounds, each = 6, 50
	for range rounds {
		time.Sleep(300 * time.Millisecond) // the worker idle, waiting on its pull
		if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for range each {
			e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: uuid.NewString(),
				Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
				UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
			if err := pub.Publish(context.Background(), &e); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		if err := child.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	// Well inside the ack wait (30 s): what is not written by then waits
	// for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := store.Usage(context.Background(), ledger.UsageQuery{CustomerID: customer})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if len(page.Data) == 1 {
			n = page.Data[0].Requests
		}
		if n == rounds*each {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events in the ledger 10 s after the worker's last stall: the others wait for the ack wait", n, rounds*each)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runStallChild runs a meter worker on the NATS server and database env
// names ("<nats url> <database url>"), until it is killed.
func runStallChild(env string) {
	natsURL, dbURL, _ := strings.Cut(env, " ")
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "stall child:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fail(err)
	}
	store, err := ledger.Open(ctx, dbURL)
	if err != nil {
		fail(err)
	}
	w, err := meter.NewWorker(ctx, js, store, meter.WorkerConfig{BatchWait: 50 * time.Millisecond})
	if err != nil {
		fail(err)
	}
	fmt.Println("ready")
	fail(fmt.Errorf("Run returned: %v", w.Run(ctx)))
}
