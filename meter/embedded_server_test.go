package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// storeFailChild names the environment variable that makes
// TestEmbeddedRestartsWhenAStoreFails the child that runs the scenario
// (its value: the store directory).
const storeFailChild = "TOLLGATE_TEST_STORE_FAIL_DIR"

// TestEmbeddedRestartsWhenAStoreFails runs out of file descriptors under a
// running embedded server, as 10,000 HTTP/1.1 streams once did: the file
// store's next sync cannot open its index, it refuses every write from then
// on, and the server must restart itself for the stream to take events
// again, with what it held before. It runs in a child process, because it
// lowers that process's descriptor limit.
func TestEmbeddedRestartsWhenAStoreFails(t *testing.T) {
	if dir := os.Getenv(storeFailChild); dir != "" {
		storeFailScenario(t, dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddedRestartsWhenAStoreFails$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), storeFailChild+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the scenario failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestEmbeddedRestartsWhenAStoreFails") {
		t.Fatalf("the scenario did not run:\n%s", out)
	}
	t.Logf("scenario:\n%s", out)
}

func storeFailScenario(t *testing.T, dir string) {
	logs := &metertest.LockedBuffer{}
	e, js := startInProcess(t, dir, meter.SyncPolicy{Interval: 20 * time.Millisecond},
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "STOREFAIL", Subjects: []string{"storefail"},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	publish := func(data string) error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := js.Publish(pctx, "storefail", []byte(data))
		return err
	}
	if err := publish("before"); err != nil {
		t.Fatal(err)
	}
	stored := 1

	// Take every descriptor the process may open, until the store fails.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(lim.Cur, 1024)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("open: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	var failErr error
	deadline := time.Now().Add(5 * time.Second)
	for failErr == nil && time.Now().Before(deadline) {
		if failErr = publish("during"); failErr == nil {
			stored++
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Hold them past the first restart attempt, which must wait: a server
	// started now could not read its streams' metadata and would come up
	// without them.
	time.Sleep(2500 * time.Millisecond)
	for _, f := range held {
		f.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if failErr == nil {
		t.Fatalf("with %d descriptors held, the store kept taking writes for 5s", len(held))
	}
	// The server answers the failed write with an error (JetStream's 10077)
	// or, once the stream has marked the failure, not at all.
	if !strings.Contains(logs.String(), "Critical write error") {
		t.Fatalf("publish failed (%v) but the server logged no store failure:\n%s", failErr, logs)
	}
	t.Logf("held %d descriptors; publish failed: %v", len(held), failErr)

	// The descriptors are back; the server must restart and take writes.
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := publish("after")
		if err == nil {
			stored++
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the descriptors were released, publish still fails: %v\nserver log:\n%s", err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e.Restarts() < 1 {
		t.Fatalf("Restarts = %d, want ≥ 1", e.Restarts())
	}
	st, err := js.Stream(ctx, "STOREFAIL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(stored) {
		t.Fatalf("stream holds %d messages, %d were acknowledged", info.State.Msgs, stored)
	}
	first, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatalf("first message after the restart: %v", err)
	}
	if string(first.Data) != "before" {
		t.Fatalf("first message after the restart: %q, want \"before\"", first.Data)
	}
	for _, want := range []string{"Critical write error", "restart failed", "too many open files", "embedded NATS: restarted"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("server log lacks %q:\n%s", want, logs)
		}
	}
	if e.Restarts() != 1 {
		t.Fatalf("Restarts = %d, want 1 (the attempt while descriptors were held must not count)", e.Restarts())
	}
	t.Logf("restarts %d, messages %d; server log:\n%s", e.Restarts(), stored, logs)
}

// TestWorkerResumesAfterEmbeddedRestart restarts the embedded server under
// a publisher and a meter worker connected in process, as a store failure
// does: the events published before and after (each retried until
// JetStream takes it) all reach the ledger, once.
func TestWorkerResumesAfterEmbeddedRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, js := startInProcess(t, t.TempDir(), meter.SyncPolicy{}, nil)
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	store := ledgertest.NewStore(t)
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchWait: 20 * time.Millisecond})
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 500*time.Millisecond)
	customer, key := uuid.NewString(), uuid.NewString()
	publish := func(n int) {
		for i := range n {
			ev := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
				Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
				UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: int64(i + 1), CompletionTokens: 1}}
			deadline := time.Now().Add(20 * time.Second)
			for err := pub.Publish(ctx, &ev); err != nil; err = pub.Publish(ctx, &ev) {
				if time.Now().After(deadline) {
					t.Fatalf("publish for 20s: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	publish(20)
	waitUsage(t, store, customer, 20)
	if err := e.Restart(false); err != nil {
		t.Fatal(err)
	}
	publish(20)
	row := waitUsage(t, store, customer, 40)
	if row.PromptTokens != 2*210 || row.CompletionTokens != 40 {
		t.Fatalf("usage = %+v, want 420 prompt and 40 completion tokens", row)
	}
	if e.Restarts() != 1 {
		t.Fatalf("Restarts = %d, want 1", e.Restarts())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestRestartRefusesAServerThatDidNotLoadItsStore: a restarted server that
// cannot read a stream's metadata comes up without it, and a stream created
// again in its place would start empty. The restart refuses such a server,
// again on a second attempt, while a key-value watch (an ordered consumer,
// kept in memory and never restored) does not count; once the metadata is
// readable the stream is back whole. Past embeddedStrictAttempts a restart
// is lenient and takes the server as it comes up.
func TestRestartRefusesAServerThatDidNotLoadItsStore(t *testing.T) {
	dir := t.TempDir()
	e, js := startInProcess(t, dir, meter.SyncPolicy{}, nil)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := js.Publish(ctx, "keep", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "KEYS"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	meta := filepath.Join(dir, "jetstream", "$G", "streams", "KEEP", "meta.inf")
	if err := os.Rename(meta, meta+".hidden"); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		err := e.Restart(false)
		if err == nil || !strings.Contains(err.Error(), "$G/KEEP") {
			t.Fatalf("attempt %d with KEEP's metadata unreadable: %v, want a refusal naming $G/KEEP", attempt, err)
		}
		if strings.Contains(err.Error(), "KV_KEYS/") {
			t.Fatalf("attempt %d counted the watch's ordered consumer: %v", attempt, err)
		}
	}
	if err := os.Rename(meta+".hidden", meta); err != nil {
		t.Fatal(err)
	}
	if err := e.Restart(false); err != nil {
		t.Fatalf("restart with the store whole: %v", err)
	}
	info, err := waitStream(t, js, "KEEP")
	if err != nil || info.State.Msgs != 5 {
		t.Fatalf("KEEP after the restart: %+v, %v; want its 5 messages", info, err)
	}

	// Lenient: the server is taken without what it could not load.
	if err := os.Rename(meta, meta+".hidden"); err != nil {
		t.Fatal(err)
	}
	if err := e.Restart(true); err != nil {
		t.Fatalf("lenient restart: %v", err)
	}
	if e.Restarts() != 2 {
		t.Fatalf("Restarts = %d, want 2", e.Restarts())
	}
}

// waitStream waits for js's connection to come back and returns the
// stream's info.
func waitStream(t *testing.T, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		st, err := js.Stream(ctx, name)
		if err == nil {
			return st.Info(ctx)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startInProcess starts an embedded server in dir and connects to it in
// process, reconnecting for ever as tollgate serve does; both end with the
// test.
func startInProcess(t *testing.T, dir string, sync meter.SyncPolicy, log *slog.Logger) (*meter.Embedded, jetstream.JetStream) {
	t.Helper()
	e, err := meter.StartEmbedded(dir, "", sync, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(e), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return e, js
}
