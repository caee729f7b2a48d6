package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// Deployments: a gateway's deployments of one model may all point at one
// simulator, each under a base URL of its own, /d/{name}/...: the request
// is served as without the prefix, counted in Stats.ByDeployment[name]
// besides its protocol, and subject to that deployment's Faults, so that a
// test can fail one deployment and compare what a gateway metered per
// deployment with what the simulator served.

// Faults are the fault knobs of one deployment, set with SetFaults or
// POST /d/{name}/faults (a JSON object of these fields). Each request to
// the deployment takes the first that applies: FailNext (counting down),
// then FailAll, then DieNext (counting down).
type Faults struct {
	// FailNext answers the next FailNext requests with Status, in the
	// protocol's error envelope, billing nothing.
	FailNext int `json:"fail_next"`
	// FailAll answers every request with Status while set.
	FailAll bool `json:"fail_all"`
	// Status is the failures' HTTP status: 401 (the deployment's key
	// refused), 429 or 500..599. Default 429.
	Status int `json:"status"`
	// RetryAfter, when set, is the Retry-After header of the failures (in
	// seconds, as text); by default 429 and 503 carry "1", as providers'.
	RetryAfter string `json:"retry_after"`
	// DieNext makes the next DieNext streamed requests die (the connection
	// closed mid-response) after DieAfter content chunks, billing what was
	// sent, as disconnect_after does; with DieAfter 0 they die right after
	// the response headers, before any frame, billing nothing.
	DieNext  int   `json:"die_next"`
	DieAfter int64 `json:"die_after"`
}

// validate checks f and fills in the default status.
func (f *Faults) validate() error {
	if f.Status == 0 {
		f.Status = http.StatusTooManyRequests
	}
	switch {
	case f.Status != http.StatusUnauthorized && f.Status != http.StatusTooManyRequests && (f.Status < 500 || f.Status > 599):
		return fmt.Errorf("status must be 401, 429 or 500..599, got %d", f.Status)
	case f.FailNext < 0 || f.DieNext < 0 || f.DieAfter < 0:
		return fmt.Errorf("fail_next, die_next and die_after may not be negative")
	}
	return nil
}

// deployments holds the deployments' counters and fault knobs.
type deployments struct {
	mu     sync.Mutex
	tally  map[string]*tally
	faults map[string]*Faults
}

func (d *deployments) of(name string) *tally {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tally == nil {
		d.tally = map[string]*tally{}
	}
	t := d.tally[name]
	if t == nil {
		t = &tally{}
		d.tally[name] = t
	}
	return t
}

// take returns the fault to apply to the next request of deployment name:
// a status (0: none, with its Retry-After), or a die after n chunks.
func (d *deployments) take(name string, stream bool) (status int, retryAfter string, die bool, after int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.faults[name]
	switch {
	case f == nil:
	case f.FailNext > 0:
		f.FailNext--
		return f.Status, f.RetryAfter, false, 0
	case f.FailAll:
		return f.Status, f.RetryAfter, false, 0
	case f.DieNext > 0 && stream:
		f.DieNext--
		return 0, "", true, f.DieAfter
	}
	return 0, "", false, 0
}

func (d *deployments) snapshot() map[string]Counts {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.tally) == 0 {
		return nil
	}
	out := make(map[string]Counts, len(d.tally))
	for name, t := range d.tally {
		out[name] = t.snapshot()
	}
	return out
}

func (d *deployments) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.tally {
		t.reset()
	}
}

// SetFaults sets the fault knobs of deployment name (replacing earlier
// ones). It returns an error for knobs out of range.
func (s *Server) SetFaults(name string, f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.deps.mu.Lock()
	defer s.deps.mu.Unlock()
	if s.deps.faults == nil {
		s.deps.faults = map[string]*Faults{}
	}
	s.deps.faults[name] = &f
	return nil
}

// DeploymentNames lists the deployments that have served requests, sorted.
func (s *Server) DeploymentNames() []string {
	names := make([]string, 0)
	for n := range s.deps.snapshot() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type deploymentKey struct{}

// deploymentOf is the deployment a request came in under ("" for none).
func deploymentOf(r *http.Request) string {
	name, _ := r.Context().Value(deploymentKey{}).(string)
	return name
}

// serveDeployment serves /d/{name}/...: POST /d/{name}/faults sets the
// knobs; anything else is served as its path without the prefix.
func (s *Server) serveDeployment(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/d/")
	name, path, _ := strings.Cut(rest, "/")
	if name == "" {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "", "no deployment named in "+r.URL.Path)
		return
	}
	if path == "faults" && r.Method == http.MethodPost {
		var f Faults
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "", "faults: "+err.Error())
			return
		}
		if err := s.SetFaults(name, f); err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "", "faults: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, f)
		return
	}
	r2 := r.Clone(context.WithValue(r.Context(), deploymentKey{}, name))
	r2.URL.Path = "/" + path
	r2.URL.RawPath = ""
	s.mux.ServeHTTP(w, r2)
}
