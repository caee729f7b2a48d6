package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestASecondSignalEndsTheShutdown: a SIGTERM or Ctrl-C during a server's
// shutdown was swallowed, so a second Ctrl-C at a terminal (or run-demo.sh,
// which exits at once on it) left tollgate relaying its streams for up to
// TOLLGATE_SHUTDOWN_GRACE and shutdown_drain, 35 s at the defaults. It now
// exits at the second signal, and the stream it was relaying is billed at
// the next start from its crash journal, as after a kill.
func TestASecondSignalEndsTheShutdown(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	if testing.Short() {
		t.Skip("builds and runs the demo stack")
	}
	d := startRunDemo(t)
	key := regexp.MustCompile(`Bearer (tg-[A-Za-z0-9_-]+)`).FindStringSubmatch(d.out.String())
	if key == nil {
		t.Fatalf("no key in the demo's output:\n%s", d.out.String())
	}
	// A stream of 14 s, its first chunk (the role's) read; its text comes
	// every half second, so it has streamed some when the second signal
	// ends the process: that text is billed from its crash journal.
	stream, id := d.slowStream(t, key[1])
	pid := d.tollgatePID(t)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	logPath := filepath.Join(d.dataDir, "tollgate.log")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tollgate did not log its shutdown within 30 s of a SIGTERM")
		}
	}
	// A second signal within a second of the first is the same request
	// to stop (a Ctrl-C reaching tollgate and the script that passes it
	// on, as TestRunDemoCtrlC sends): this one comes after it.
	time.Sleep(time.Until(first.Add(1100 * time.Millisecond)))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stream ends when the process does: cut, without its [DONE].
	// Before, it was relayed to its end, 14 s, the grace being 30 s.
	body := <-stream
	if strings.Contains(body, "[DONE]") || !regexp.MustCompile(`"content":"[^"]`).MatchString(body) {
		t.Errorf("the stream relayed across a second SIGTERM:\n%s\nwant some text, then the process gone before its end", body[max(0, len(body)-300):])
	}
	select {
	case <-d.done: // run-demo.sh sees tollgate exit 1: "a demo process exited on its own"
	case <-time.After(60 * time.Second):
		t.Fatal("run-demo.sh did not end after tollgate's second SIGTERM")
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "a second signal: exiting now") {
		t.Errorf("tollgate's log does not say why it exited before its shutdown finished:\n%s", b)
	}

	// `make run` again on the same data directory and database: the
	// request cut off by the exit is recorded from the crash journal.
	// The script's exit stops upstream-sim without waiting for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", d.simAddr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("upstream-sim still listens 30 s after run-demo.sh ended")
		}
	}
	again, inUse := d.launch(t)
	if again == nil {
		t.Fatalf("the demo did not start again on its ports:\n%s", inUse)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, d.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var status string
	var completion int64
	for {
		err = db.QueryRow(ctx, "SELECT status, completion_tokens FROM usage_events WHERE id = $1", id).Scan(&status, &completion)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || status != "crashed" || completion < 1 {
		t.Errorf("the stream cut by the second signal, after the restart: status %q, %d completion tokens (%v); "+
			"want it recorded crashed with the output streamed before the exit", status, completion, err)
	}
	if err := syscall.Kill(-again.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	again.stopped(t, "Ctrl-C after the restart")
}
