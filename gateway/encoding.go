package gateway

import (
	"fmt"
	"net/http"
	"strings"
)

// unaskedCoding returns the Content-Encoding of a 200 answer h when it
// names a compression the gateway cannot read, else "". The gateway asks
// upstreams for gzip alone (net/http's transport asks, and undoes it,
// dropping the header), so a coding left in the header is one it did not
// ask for: br, zstd, deflate (a proxy compressing what it serves).
// Relayed, the compressed bytes reached the client without the header
// that says how to read them (the gateway sends its own), under a JSON or
// SSE label, the chat stream route writing its own chunks into them, and
// were billed as output, estimated. identity, and names of no
// compression (a server's mislabelled "utf-8"), are "": the body is read
// as it is.
func unaskedCoding(h http.Header) string {
	v := strings.Join(h.Values("Content-Encoding"), ",")
	for c := range strings.SplitSeq(v, ",") {
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress", "dcb", "dcz":
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// codingMessage is what a client is told of a 200 in coding, an
// unaskedCoding.
func codingMessage(coding string) string {
	return fmt.Sprintf("the upstream answered 200 with Content-Encoding %q, which the gateway did not ask for and cannot read", coding)
}
