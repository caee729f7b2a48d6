package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tollgate-dev/tollgate/gateway"
)

// oneWriteUpstream serves every request on its connections with body, sent
// with its header and the chunked body's end in one write: an upstream
// whose whole short stream reaches the gateway in one read.
func oneWriteUpstream(t *testing.T, body []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	resp := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", len(body))
	resp = append(append(resp, body...), "\r\n0\r\n\r\n"...)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// shortStream is a chat stream of n content chunks, a finish, the usage
// chunk and [DONE]: about 3 KiB with n = 10, like cmd/loadgen's short
// stream (net/http's 4 KiB write buffer splits a larger first write).
func shortStream(n int) []byte {
	var b bytes.Buffer
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	for i := range n {
		fmt.Fprintf(&b, "data: %s{\"index\":0,\"delta\":{\"content\":\"word %d %s\"},\"finish_reason\":null}]}\n\n", head, i, strings.Repeat("x", 100))
	}
	fmt.Fprintf(&b, "data: %s{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// TestAShortStreamReachesTheClientInTwoWrites: a short stream the upstream
// sent in one piece reaches the client in two writes, as the TCP segments
// that carried data to the client's socket count them: the header with
// every content chunk, then, once the event is durable, the usage chunk,
// [DONE] and the body's end. It took four: the SSE reader's first 1 KiB on
// its own, the rest, the end after the commit, and net/http's last chunk
// (BENCHMARKS.md, "Issue 16, stop 62").
func TestAShortStreamReachesTheClientInTwoWrites(t *testing.T) {
	sink := &memSink{}
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "one", Type: "openai", BaseURL: oneWriteUpstream(t, shortStream(10)), APIKey: "sk-one-1234"}},
		Models:    []gateway.ModelConfig{{Name: "m", Provider: "one"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: &memJournal{}})
	for _, includeUsage := range []bool{true, false} {
		var conn *net.TCPConn
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				conn = c.(*net.TCPConn)
			}
			return c, err
		}}}
		body := fmt.Sprintf(`{"model":"m","stream":true,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"hi"}]}`, includeUsage)
		req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) ||
			bytes.Contains(got, []byte(`"usage"`)) != includeUsage {
			t.Fatalf("include_usage %v: %d %q, %v", includeUsage, resp.StatusCode, got, err)
		}
		raw, err := conn.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var info *unix.TCPInfo
		_ = raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
		if err != nil {
			t.Fatal(err)
		}
		if info.Data_segs_in != 2 {
			t.Errorf("include_usage %v: the response came in %d writes, want 2", includeUsage, info.Data_segs_in)
		}
		client.CloseIdleConnections()
	}
	if n := sink.count(); n != 2 {
		t.Errorf("%d events published, want 2", n)
	}
}
