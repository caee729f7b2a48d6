package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// requestBody draws one request of kind k: its body, whether it streams,
// and for kCancel after how many content chunks the client hangs up.
func requestBody(k kind, r *rand.Rand) (body []byte, stream bool, hangUpAfter int) {
	model := []string{"sim-pro", "sim-small"}[r.IntN(2)]
	chunks := 1 + r.IntN(8)
	// 10-50ms per chunk: a stream lasts 50-400ms, so faults find requests in flight.
	md := map[string]string{"sim_chunks": strconv.Itoa(chunks), "sim_delay_ms": strconv.Itoa(10 + r.IntN(41))}
	req := map[string]any{"model": model, "max_tokens": 4 + r.IntN(37),
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("word ", 1+r.IntN(30))}}}
	stream, include := true, r.IntN(2) == 0
	switch k {
	case kStream:
		include = true
	case kStreamBare:
		include = false
	case kUnary:
		stream = false
	case kCancel:
		md["sim_delay_ms"], md["sim_chunks"] = "15", "8"
		req["max_tokens"] = 16 + r.IntN(16)
		hangUpAfter = 1 + r.IntN(3)
	case kError:
		md["sim_fault"] = fmt.Sprintf("error_after:%d,usage_in_error", r.IntN(chunks+1))
	case kStall:
		md["sim_fault"] = "stall,cumulative_usage"
	case kUpDisconnect:
		md["sim_fault"] = fmt.Sprintf("disconnect_after:%d,cumulative_usage", r.IntN(chunks+1))
	case kStatus:
		md["sim_status"] = []string{"429", "500", "503"}[r.IntN(3)]
	case kDeployed:
		req["model"], stream = "smart", r.IntN(3) > 0
	case kLong:
		// 32-64 tokens, so that even sim-pro (half reasoning) has content
		// for 16 chunks: 0.5-2s a stream.
		md["sim_chunks"], md["sim_delay_ms"] = strconv.Itoa(8+r.IntN(9)), strconv.Itoa(60+r.IntN(61))
		req["max_tokens"] = 32 + r.IntN(33)
	}
	req["stream"], req["metadata"] = stream, md
	if stream && include {
		req["stream_options"] = map[string]bool{"include_usage": true}
	}
	body, _ = json.Marshal(req)
	return body, stream, hangUpAfter
}

// tail is an io.Writer that keeps the last bytes written: enough to tell
// whether a stream ended in [DONE].
type tail struct{ b []byte }

const doneFrame = "data: [DONE]\n\n"

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*len(doneFrame) {
		t.b = append(t.b[:0], t.b[len(t.b)-len(doneFrame):]...)
	}
	return len(p), nil
}

func (t *tail) done() bool { return bytes.HasSuffix(t.b, []byte(doneFrame)) }
