package gateway

import (
	"fmt"
	"io"
)

// MaxOutputText bounds the output text a response's tap keeps for a
// tokenizer estimate (tap.Report.Output), in bytes: 16 MiB, about four
// million tokens, some thirty times the longest output any provider
// documents for one request (128,000 tokens). An upstream that streams
// past it (a model looping, a broken or hostile server) would otherwise
// make the request hold all of its output in memory until
// request_timeout, and a few such requests end the process, and every
// stream in it, out of memory. Past it the stream is broken off as an
// upstream error (errOutputBound): the client gets the error in its
// protocol, the event bills what was relayed up to there.
const MaxOutputText = 16 << 20

// errOutputBound ends the read of an upstream body whose tapped output
// passed MaxOutputText.
var errOutputBound = fmt.Errorf("the upstream's output passed %d MiB of text, more than any model writes in one answer: broken off", MaxOutputText>>20)

// boundedBody is an upstream response body that fails its reads with
// errOutputBound once the exchange's tap holds more than MaxOutputText
// bytes of output. The relay that reads it is the goroutine that taps
// it, so the bound is checked between two of its reads: the output may
// pass it by the events of one read (bounded by the SSE reader's largest
// event).
type boundedBody struct {
	x    *exchange
	body io.ReadCloser
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.x.report.Output.Len() > MaxOutputText {
		return 0, errOutputBound
	}
	return b.body.Read(p)
}

func (b *boundedBody) Close() error { return b.body.Close() }
