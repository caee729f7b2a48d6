package sse

import (
	"bytes"
	"fmt"
	"testing"

	gosse "github.com/tmaxmax/go-sse"
)

// syntheticStream is a realistic OpenAI chat completion stream: 200 chunks
// of about 250 bytes, "\n\n" framed, a keep-alive comment every 20 chunks, a
// usage chunk and [DONE].
func syntheticStream() []byte {
	var b bytes.Buffer
	for i := range 200 {
		if i%20 == 0 {
			b.WriteString(": OPENROUTER PROCESSING\n\n")
		}
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk",`+
			`"created":1733000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1",`+
			`"choices":[{"index":0,"delta":{"content":" token%03d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","choices":[],` +
		`"usage":{"prompt_tokens":1200,"completion_tokens":200,"total_tokens":1400}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkReader reads the synthetic stream with a new Reader per
// operation, as the gateway does once per upstream response.
func BenchmarkReader(b *testing.B) {
	in := syntheticStream()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r, n := NewReader(bytes.NewReader(in)), 0
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			n += len(ev.Data)
		}
		if n == 0 {
			b.Fatal("no data")
		}
	}
}

// BenchmarkReaderReset is BenchmarkReader with one Reader reused through
// Reset: the steady state, with no allocation at all.
func BenchmarkReaderReset(b *testing.B) {
	in := syntheticStream()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	src := bytes.NewReader(in)
	r := NewReader(src)
	for b.Loop() {
		src.Reset(in)
		r.Reset(src)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// BenchmarkGoSSE reads the same stream with go-sse's sse.Read, for the ratio.
func BenchmarkGoSSE(b *testing.B) {
	in := syntheticStream()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for ev, err := range gosse.Read(bytes.NewReader(in), nil) {
			if err != nil {
				b.Fatal(err)
			}
			n += len(ev.Data)
		}
		if n == 0 {
			b.Fatal("no data")
		}
	}
}

// BenchmarkAppendEvent encodes the synthetic stream's events into a reused
// buffer.
func BenchmarkAppendEvent(b *testing.B) {
	in := syntheticStream()
	evs, err := parse(in, chunkings[0], 0)
	if err != nil {
		b.Fatal(err)
	}
	events := make([]Event, len(evs))
	for i, ev := range evs {
		events[i] = ev.event()
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	buf := make([]byte, 0, 2*len(in))
	for b.Loop() {
		buf = buf[:0]
		for _, ev := range events {
			buf = AppendEvent(buf, ev)
		}
	}
}
