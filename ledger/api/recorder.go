package api

import (
	"bytes"
	"net/http"
)

// Recorder is an http.ResponseWriter that keeps a handler's answer in
// memory: its header (the one given to NewRecorder), its status (the
// first written; 200 once a body is written without one; 0 while nothing
// is) and its body. The customer API makes its answers in one before it
// sends them (Self), and the console and the portal serve their calls to
// the API in process through one (ledger/web).
type Recorder struct {
	header http.Header
	Status int
	Body   bytes.Buffer
}

// NewRecorder returns a Recorder whose handler writes its header fields
// into header.
func NewRecorder(header http.Header) *Recorder { return &Recorder{header: header} }

// Header returns the header given to NewRecorder.
func (r *Recorder) Header() http.Header { return r.header }

// WriteHeader records status, unless one was recorded already.
func (r *Recorder) WriteHeader(status int) {
	if r.Status == 0 {
		r.Status = status
	}
}

// Write appends p to the body, the status 200 when none was written.
func (r *Recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.Body.Write(p)
}
