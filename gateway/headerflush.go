package gateway

import "net/http"

// headerFlusher wraps the ResponseWriter of every authenticated request.
// net/http writes the response header in the first flush, or in the first
// write that overflows its 2 KiB response buffer; that call alone needs
// about 4 KiB of stack. Made from the depth of a stream relay, it doubles
// the handler goroutine's stack from 8 to 16 KiB, and the stack stays
// doubled for the life of the stream, since an idle stream blocks almost as
// deep (the runtime halves a stack only when less than a quarter of it is
// used). headerFlusher therefore makes that one call on another goroutine,
// one the server keeps between calls (see workers.aside), while the
// handler waits; later writes and flushes go straight through.
type headerFlusher struct {
	http.ResponseWriter
	side     *workers     // runs the call that sends the header (see workers.aside)
	flushTo  func() error // the flush of the writer underneath (see flusherOf)
	buffered int          // bytes written while the header was held back
	sent     bool         // the header may have gone out
}

// bufferBeforeHeader is the size in bytes of net/http's response buffer
// (bufferBeforeChunkingSize): writes that fit in it send nothing yet.
const bufferBeforeHeader = 2048

func newHeaderFlusher(w http.ResponseWriter, side *workers) *headerFlusher {
	return &headerFlusher{ResponseWriter: w, side: side, flushTo: flusherOf(w)}
}

// flusherOf finds the flush of w as http.ResponseController.Flush does
// (FlushError, else Flush, through Unwrap), once: ResponseController
// searches again on every call, once per event of a stream.
func flusherOf(w http.ResponseWriter) func() error {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }:
			return t.FlushError
		case http.Flusher:
			return func() error { t.Flush(); return nil }
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return func() error { return http.ErrNotSupported }
		}
	}
}

func (h *headerFlusher) Write(p []byte) (int, error) {
	if h.sent || h.buffered+len(p) <= bufferBeforeHeader {
		h.buffered += len(p)
		return h.ResponseWriter.Write(p)
	}
	h.sent = true
	var n int
	var err error
	h.side.aside(func() { n, err = h.ResponseWriter.Write(p) })
	return n, err
}

// FlushError flushes the response, as http.ResponseController.Flush does.
func (h *headerFlusher) FlushError() error {
	if h.sent {
		return h.flushTo()
	}
	h.sent = true
	var err error
	h.side.aside(func() { err = h.flushTo() })
	return err
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (h *headerFlusher) Unwrap() http.ResponseWriter { return h.ResponseWriter }
