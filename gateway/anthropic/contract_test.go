package anthropic

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/usage"
)

// The gateway's contracts (gateway/protocol.go), restated because this
// package cannot import gateway (gateway imports it). chunkStream is an
// alias of an unnamed interface type, as ChunkStream is: a method returning
// a defined interface type of another package can never match, so the
// gateway's declaration must be the alias form for Chat to satisfy its
// chatUpstream directly.
type (
	streamTap interface {
		Event(ev *sse.Event, r *usage.Report)
	}
	chunkStream = interface {
		Event(ev *sse.Event, r *usage.Report, dst [][]byte) [][]byte
	}
	chatUpstream interface {
		Request(body []byte, upstreamModel string, stream bool) (path string, upBody []byte, err error)
		Header(h http.Header, apiKey string)
		NewStream(id, model string, created int64) chunkStream
		Body(body []byte, id, model string, created int64, r *usage.Report) ([]byte, error)
	}
)

var (
	_ streamTap    = (*Tap)(nil)
	_ chatUpstream = Chat{}
	_ chunkStream  = (*Stream)(nil)
)
