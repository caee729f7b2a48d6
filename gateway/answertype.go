package gateway

import (
	"mime"
	"strings"
)

// answerType is the Content-Type a client gets for an upstream answer
// labelled upstream: the label when it is one the gateway's routes answer
// in (JSON, application/*+json, an SSE stream, plain text), else fallback.
// An upstream's text/html (or none, which net/http would sniff) is not
// relayed: the answer holds model output a prompt can make into markup,
// which a browser would run as a page of the gateway's origin.
func answerType(upstream, fallback string) string {
	mt, _, err := mime.ParseMediaType(upstream)
	switch {
	case err != nil:
		return fallback
	case mt == "application/json", mt == "text/event-stream", mt == "text/plain",
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return upstream
	}
	return fallback
}
