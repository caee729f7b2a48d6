//go:build unix

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection: the client's
// wrapped in a readAheadConn, and the server's.
func tcpPair(t testing.TB) (*readAheadConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	rc, ok := newReadAheadConn(c).(*readAheadConn)
	if !ok {
		t.Fatal("a TCP connection was not wrapped")
	}
	t.Cleanup(func() { rc.Close(); srv.Close() })
	return rc, srv
}

// checkHeld fails unless c holds a buffer exactly when it has bytes
// pending: an idle connection holds none.
func checkHeld(t *testing.T, c *readAheadConn) {
	t.Helper()
	if (c.buf != nil) != (len(c.pending) > 0) {
		t.Fatalf("buffer held %v with %d bytes pending", c.buf != nil, len(c.pending))
	}
}

// TestReadAheadSameBytes writes a random stream in random pieces with
// random pauses, and reads it through a readAheadConn with buffers of
// random sizes: the bytes read are the bytes written, then io.EOF.
func TestReadAheadSameBytes(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			want := make([]byte, 300_000+rng.IntN(100_000))
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			c, srv := tcpPair(t)
			go func() {
				w := rand.New(rand.NewPCG(seed, 2))
				for rest := want; len(rest) > 0; {
					n := min(len(rest), 1+w.IntN(3*readAhead))
					if _, err := srv.Write(rest[:n]); err != nil {
						return
					}
					rest = rest[n:]
					if w.IntN(8) == 0 {
						time.Sleep(time.Duration(w.IntN(500)) * time.Microsecond)
					}
				}
				srv.Close()
			}()
			var got []byte
			for {
				p := make([]byte, 1+rng.IntN(readAhead+100))
				n, err := c.Read(p)
				got = append(got, p[:n]...)
				checkHeld(t, c)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
			}
		})
	}
}

// TestReadAheadTakesMore shows what the read ahead is for: with 10 KiB
// waiting in the socket, one read system call takes in all of it, and the
// next four reads of 2 KiB are served from it, after which it holds no
// buffer.
func TestReadAheadTakesMore(t *testing.T) {
	c, srv := tcpPair(t)
	want := bytes.Repeat([]byte("0123456789"), 1024)
	if _, err := srv.Write(want); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // one loopback write: all of it arrives at once
	var got []byte
	for i := range 5 {
		p := make([]byte, 2048)
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
		if want := len(want) - 2048*(i+1); n != 2048 || len(c.pending) != want {
			t.Fatalf("read %d: %d bytes, %d pending, want 2048 and %d", i, n, len(c.pending), want)
		}
		checkHeld(t, c)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the bytes written")
	}
}

// TestReadAheadErrors: a deadline, and a close while a read waits, end
// the read with net.Conn's errors.
func TestReadAheadErrors(t *testing.T) {
	c, _ := tcpPair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 100))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	checkHeld(t, c)
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 100))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting on a closed connection did not return")
	}
}

// TestReadAheadThroughTransport relays an SSE response through net/http's
// transport over readAheadConns, as the gateway's upstream client does:
// the body arrives whole, and the connection is reused.
func TestReadAheadThroughTransport(t *testing.T) {
	var events strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&events, "data: {\"i\":%d,\"content\":\"tok \"}\n\n", i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for ev := range strings.SplitAfterSeq(events.String(), "\n\n") {
			io.WriteString(w, ev)
			rc.Flush()
		}
	}))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ReadBufferSize = upstreamReadBuffer
	dials := 0
	dial := tr.DialContext
	tr.DialContext = dialReadAhead(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return dial(ctx, network, addr)
	})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(bufio.NewReaderSize(resp.Body, 1024))
		resp.Body.Close()
		if err != nil || string(body) != events.String() {
			t.Fatalf("body of %d bytes (%v), want %d", len(body), err, events.Len())
		}
	}
	if dials != 1 {
		t.Errorf("%d connections for 3 requests in turn, want 1", dials)
	}
}

// BenchmarkUpstreamRead reads 256 KiB waiting in a socket through
// net/http's 2 KiB read buffer, as an SSE reader does (a line at a time),
// from the connection itself and through a readAheadConn.
func BenchmarkUpstreamRead(b *testing.B) {
	line := []byte(`data: {"id":"chatcmpl-a27a2fd5df048e0d253c63ab","object":"chat.completion.chunk","created":1795687566,"model":"sim-small","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"usage":null}` + "\n")
	payload := bytes.Repeat(line, (256<<10)/len(line))
	for _, name := range []string{"conn", "readahead"} {
		b.Run(name, func(b *testing.B) {
			c, srv := tcpPair(b)
			var r io.Reader = c
			if name == "conn" {
				r = c.Conn
			}
			br := bufio.NewReaderSize(r, upstreamReadBuffer)
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				b.StopTimer()
				if _, err := srv.Write(payload); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for n := 0; n < len(payload); {
					l, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					n += len(l)
				}
			}
		})
	}
}
