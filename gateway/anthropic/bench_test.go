package anthropic

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// syntheticStream is a realistic Messages stream: message_start with cache
// figures, a ping, one text block of 200 text_delta events, and a
// cumulative message_delta, padded as Anthropic's are.
func syntheticStream() []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-6\"," +
		"\"id\":\"msg_01E3Wn1NynZw9FALZ68znj9S\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null," +
		"\"stop_sequence\":null,\"usage\":{\"input_tokens\":702,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":1200," +
		"\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":1,\"service_tier\":\"standard\"}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	for i := range 200 {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"+
			"\"delta\":{\"type\":\"text_delta\",\"text\":\" token %03d of the answer\"}}        \n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null}," +
		"\"usage\":{\"input_tokens\":702,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":1200,\"output_tokens\":1000}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

// BenchmarkTap taps the synthetic stream's events (parsed once, beforehand)
// with a new Tap and Report per operation, as the gateway does per response.
func BenchmarkTap(b *testing.B) {
	in := syntheticStream()
	events := readEvents(b, in)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		var tp Tap
		var r tap.Report
		for i := range events {
			tp.Event(&events[i], &r)
		}
		if !r.Final || r.Usage.CompletionTokens != 1000 {
			b.Fatalf("report %+v", r.Usage)
		}
	}
}

// BenchmarkStream translates the synthetic stream into chunks.
func BenchmarkStream(b *testing.B) {
	in := syntheticStream()
	events := readEvents(b, in)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var dst [][]byte
	for b.Loop() {
		s := Chat{}.NewStream("chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012", "anthropic/claude-sonnet-4-6", 1733000000)
		var r tap.Report
		for i := range events {
			dst = s.Event(&events[i], &r, dst[:0])
		}
	}
}
