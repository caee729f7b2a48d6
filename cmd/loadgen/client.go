package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// requestBody is the chat completion every request of a run sends: model
// sim-small (no reasoning, no cache), max_tokens = chunks so the simulator
// streams exactly that many one-token content chunks, the prompt as
// promptWords words, and the simulator's pacing in metadata (string values,
// which pass through any gateway).
func requestBody(model string, stream bool, chunks, promptWords, delayMs int) []byte {
	words := strings.TrimSpace(strings.Repeat("word ", max(promptWords, 1)))
	req := map[string]any{
		"model":      model,
		"stream":     stream,
		"max_tokens": chunks,
		"messages":   []map[string]string{{"role": "user", "content": words}},
		"metadata": map[string]string{
			"sim_chunks":   strconv.Itoa(chunks),
			"sim_delay_ms": strconv.Itoa(delayMs),
		},
	}
	if stream {
		req["stream_options"] = map[string]bool{"include_usage": true}
	}
	b, _ := json.Marshal(req)
	return b
}

// newClient is an HTTP/1.1 client whose pool keeps a connection per
// concurrent stream, so no stream waits for a connection or redials.
func newClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      16 << 10,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// result is what one request measured.
type result struct {
	status int
	// ttft is the time from sending the request to the first content
	// chunk (a data: event whose delta has non-empty content); for a
	// non-streamed request, to the end of the body.
	ttft   time.Duration
	chunks int
	// err is the error kind ("" when the request fully succeeded).
	err string
}

// streamer sends requests and reads their SSE answers; one per worker, it
// reuses its read buffer.
type streamer struct {
	client *http.Client
	url    string
	key    string
	body   []byte
	stream bool
	// want is the content chunks a correct answer has (0: not checked).
	want int
	br   *bufio.Reader
}

var (
	dataPrefix    = []byte("data:")
	doneData      = []byte("[DONE]")
	contentKey    = []byte(`"content":"`)
	errorPrefix   = []byte(`{"error"`)
	errNoDone     = "stream ended without [DONE]"
	errErrorFrame = "error frame in stream"
)

// isContent reports whether an OpenAI chunk carries content: a
// "content":"..." that is not empty (the role chunk's is "").
func isContent(payload []byte) bool {
	i := bytes.Index(payload, contentKey)
	return i >= 0 && i+len(contentKey) < len(payload) && payload[i+len(contentKey)] != '"'
}

// do sends one request and reads its answer to the end. Gaps between
// consecutive content chunks go to gaps (when not nil).
func (s *streamer) do(ctx context.Context, gaps *hist) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(s.body))
	if err != nil {
		return result{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return result{err: "request: " + transportErr(err)}
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		r.err = "HTTP " + strconv.Itoa(resp.StatusCode)
		return r
	}
	if !s.stream {
		b, err := io.ReadAll(resp.Body)
		r.ttft = time.Since(start)
		switch {
		case err != nil:
			r.err = transportErr(err)
		case !isContent(b):
			r.err = "no content in response"
		default:
			r.chunks = 1
		}
		return r
	}
	if s.br == nil {
		s.br = bufio.NewReaderSize(resp.Body, 16<<10)
	} else {
		s.br.Reset(resp.Body)
	}
	defer s.br.Reset(nil)
	var last time.Time
	done := false
	for {
		line, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if payload, ok := bytes.CutPrefix(line, dataPrefix); ok {
			payload = bytes.TrimSpace(payload)
			switch {
			case bytes.Equal(payload, doneData):
				done = true
			case isContent(payload):
				now := time.Now()
				if r.chunks == 0 {
					r.ttft = now.Sub(start)
				} else if gaps != nil {
					gaps.record(now.Sub(last))
				}
				last = now
				r.chunks++
			case bytes.HasPrefix(payload, errorPrefix):
				r.err = errErrorFrame
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && r.err == "" {
				r.err = transportErr(err)
			}
			break
		}
	}
	switch {
	case r.err != "":
	case !done:
		r.err = errNoDone
	case s.want > 0 && r.chunks != s.want:
		r.err = fmt.Sprintf("%d content chunks, want %d", r.chunks, s.want)
	}
	return r
}

// transportErr names a transport error by kind, without the addresses
// that would make each one unique.
func transportErr(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	msg := err.Error()
	for _, kind := range []string{"connection refused", "connection reset", "too many open files",
		"broken pipe", "unexpected EOF", "EOF", "cannot assign requested address"} {
		if strings.Contains(msg, kind) {
			return kind
		}
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}
