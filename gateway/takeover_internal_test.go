package gateway

import (
	"context"
	"io"
	"net"
	"testing"
)

// TestTakenStreamWritesReachTheConnection: a taken stream's writes go to
// its connection once a chunk's worth is held, flushed or not. The relay
// flushes only when the upstream has nothing more on its way, so an
// upstream that kept events coming faster than they were read (a 1.3 GB
// stream took 4.2 GB of RSS) had every byte of them held in the write
// buffer, none sent, and a client that read nothing never met its write
// deadline: the buffer grew for the stream's whole life.
func TestTakenStreamWritesReachTheConnection(t *testing.T) {
	conn, client := net.Pipe()
	defer conn.Close()
	defer client.Close()
	got := make(chan int64)
	go func() {
		n, _ := io.Copy(io.Discard, client)
		got <- n
	}()
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tk := &takeover{taken: true, conn: conn, cancel: cancel}
	event := make([]byte, 32<<10) // a chatWriter's batch (maxBatch)
	for i := range 512 {          // 16 MiB, never flushed
		if _, err := tk.Write(event); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if tk.buf != nil && len(*tk.buf) > chunkHead+maxTakenBuf+len(event) {
			t.Fatalf("after %d writes of %d bytes and no flush, %d bytes are held and not sent: a taken stream's buffer must stay bounded",
				i+1, len(event), len(*tk.buf))
		}
	}
	if err := tk.send(false); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := <-got; n < 512*int64(len(event)) {
		t.Fatalf("the client got %d bytes of %d", n, 512*len(event))
	}
}
