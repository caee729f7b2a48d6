package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/usage"
)

// nativeCall is one request to a pass-through endpoint: the client speaks
// the provider's own protocol, and gets the provider's bytes unchanged.
type nativeCall struct {
	url       string
	body      []byte
	header    func(http.Header)
	stream    bool
	tap       streamTap                         // for streams
	bodyUsage func([]byte, *usage.Report) error // for whole bodies
	fail      errorWriter
}

// passThrough sends c upstream and relays the answer byte for byte, each
// read flushed, while the tap reads the usage from the same bytes.
func (s *Server) passThrough(w http.ResponseWriter, x *exchange, rt route, c nativeCall) {
	resp := s.callUpstream(w, x, rt, c.url, c.body, c.header, c.fail)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if !c.stream {
		body, err := s.readBody(x, resp.Body)
		if err != nil {
			status, eventStatus := x.failure()
			x.fail(w, c.fail, status, eventStatus, err)
			return
		}
		if err := c.bodyUsage(body, &x.report); err != nil {
			x.report.Error = "unreadable upstream body: " + err.Error()
		}
		copyHeader(w, resp)
		w.WriteHeader(http.StatusOK)
		x.event.HTTPStatus = http.StatusOK
		x.firstByte()
		x.markComplete()
		if _, err := w.Write(body); err != nil {
			x.clientGone.Store(true)
		}
		return
	}
	x.armStall()
	tee := &teeWriter{src: resp.Body, w: w, rc: http.NewResponseController(w), x: x, resp: resp}
	rd := readers.Get().(*sse.Reader)
	rd.Reset(tee)
	defer func() { rd.Reset(nil); readers.Put(rd) }()
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			x.markComplete() // every upstream byte was forwarded
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !tee.started && !x.clientGone.Load() {
				status, eventStatus := x.failure()
				x.fail(w, c.fail, status, eventStatus, err)
			} else if !errors.Is(err, io.EOF) && !x.clientGone.Load() {
				if x.report.Error == "" {
					x.report.Error = "upstream stream broke: " + err.Error()
				}
				// The provider's protocol has no error frame of ours to
				// send: abort, so the client sees a broken stream, not a
				// clean end. The deferred finish still records the event.
				panic(http.ErrAbortHandler)
			}
			return
		}
		c.tap.Event(&ev, &x.report)
		if x.clientGone.Load() && x.report.Final {
			return
		}
	}
}

// teeWriter hands upstream bytes to the SSE reader and, as they are read,
// to the client (flushed), sending the response headers with the first.
type teeWriter struct {
	src     io.Reader
	w       http.ResponseWriter
	rc      *http.ResponseController
	x       *exchange
	resp    *http.Response
	started bool
}

func (t *teeWriter) Read(p []byte) (int, error) {
	n, err := t.src.Read(p)
	if n > 0 {
		t.x.touch()
		if !t.x.clientGone.Load() {
			if !t.started {
				t.started = true
				copyHeader(t.w, t.resp)
				t.w.WriteHeader(http.StatusOK)
				t.x.event.HTTPStatus = http.StatusOK
				t.x.firstByte()
			}
			if _, werr := t.w.Write(p[:n]); werr != nil || t.rc.Flush() != nil {
				t.x.clientGone.Store(true)
			}
		}
	}
	return n, err
}

// copyHeader passes the upstream's content headers on.
func copyHeader(w http.ResponseWriter, resp *http.Response) {
	for _, k := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("X-Accel-Buffering", "no")
}
