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
	"time"

	"golang.org/x/sys/unix"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// rawUpstream serves every request on its connections with the pieces of
// a body, each a chunk of the chunked body sent in one write, pause apart:
// the first with the response's header, the last with the body's end. One
// piece is an upstream whose whole short stream reaches the gateway in one
// read.
func rawUpstream(t *testing.T, pause time.Duration, pieces ...[]byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	writes := make([][]byte, len(pieces))
	for i, p := range pieces {
		if i == 0 {
			writes[i] = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		}
		writes[i] = append(fmt.Appendf(writes[i], "%x\r\n", len(p)), p...)
		writes[i] = append(writes[i], "\r\n"...)
		if i == len(pieces)-1 {
			writes[i] = append(writes[i], "0\r\n\r\n"...)
		}
	}
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
					for i, w := range writes {
						if i > 0 {
							time.Sleep(pause)
						}
						if _, err := c.Write(w); err != nil {
							return
						}
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
		Providers: []gateway.ProviderConfig{{Name: "one", Type: "openai", BaseURL: rawUpstream(t, 0, shortStream(10)), APIKey: "sk-one-1234"}},
		Models:    []gateway.ModelConfig{{Name: "m", Provider: "one"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: &memJournal{}})
	for _, includeUsage := range []bool{true, false} {
		body := fmt.Sprintf(`{"model":"m","stream":true,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"hi"}]}`, includeUsage)
		got, n := streamWrites(t, gw.Addr(), "/v1/chat/completions", body)
		if !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) || bytes.Contains(got, []byte(`"usage"`)) != includeUsage {
			t.Fatalf("include_usage %v: %q", includeUsage, got)
		}
		if n != 2 {
			t.Errorf("include_usage %v: the response came in %d writes, want 2", includeUsage, n)
		}
	}
	if n := sink.count(); n != 2 {
		t.Errorf("%d events published, want 2", n)
	}
}

// streamWrites posts body to path on the gateway at addr, and returns the
// response's body (its status checked: 200) and how many TCP segments
// brought its data: the gateway's writes to the client, each smaller than
// the loopback's MSS and sent at once (net/http sets TCP_NODELAY).
func streamWrites(t *testing.T, addr, path, body string) ([]byte, uint32) {
	t.Helper()
	var conn *net.TCPConn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			conn = c.(*net.TCPConn)
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %q, %v", path, resp.StatusCode, got, err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	if cerr := raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got, info.Data_segs_in
}

// TestATakenStreamEndsInOneWrite: a stream that outlasts takeAfter (its
// connection taken from net/http, see takeover) and whose last piece
// brings the upstream body's end sends its end, the usage chunk, [DONE]
// and the body's last chunk, in one write: three writes for the header
// and first events, the finish, and the end. Its end took two.
func TestATakenStreamEndsInOneWrite(t *testing.T) {
	stream := shortStream(2)
	cut := bytes.Index(stream, []byte(`"finish_reason":"stop"`))
	cut = bytes.LastIndex(stream[:cut], []byte("data: "))
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "one", Type: "openai", BaseURL: rawUpstream(t, 300*time.Millisecond, stream[:cut], stream[cut:]), APIKey: "sk-one-1234"}},
		Models:    []gateway.ModelConfig{{Name: "m", Provider: "one"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}, Journal: &memJournal{}})
	chat := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	if _, n := streamWrites(t, gw.Addr(), "/v1/chat/completions", chat); n != 3 {
		t.Errorf("the response came in %d writes, want 3", n)
	}
	if n := gateway.TakenStreams(gw); n != 1 {
		t.Errorf("%d streams taken from net/http, want 1", n)
	}
}

// TestANativeStreamReachesTheClientInTwoWrites: an Anthropic stream on
// the native route that the upstream sent in one piece reaches the client
// in two writes: its events, then, once the event is durable, its end
// (message_stop) with the body's end. It took three.
func TestANativeStreamReachesTheClientInTwoWrites(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		strings.Repeat(anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}`), 10) +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`) + anthDelta5 +
		anthEv("message_stop", `{"type":"message_stop"}`)
	sink := &memSink{}
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "one", Type: "anthropic", BaseURL: rawUpstream(t, 0, []byte(body)), APIKey: "sk-ant-1234"}},
		Models:    []gateway.ModelConfig{{Name: "m", Provider: "one"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: &memJournal{}})
	got, n := streamWrites(t, gw.Addr(), "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !bytes.Contains(got, []byte("event: message_stop")) {
		t.Fatalf("no message_stop: %q", got)
	}
	if n != 2 {
		t.Errorf("the response came in %d writes, want 2", n)
	}
	if e := sink.eventWhere(t, "the stream", func(*usage.Event) bool { return true }); e.Usage.CompletionTokens != 5 {
		t.Errorf("billed %d completion tokens, want 5", e.Usage.CompletionTokens)
	}
}
