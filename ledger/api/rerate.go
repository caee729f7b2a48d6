package api

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// ndjson is the media type of a re-rating's progress stream: one JSON
// object a line.
const ndjson = "application/x-ndjson"

// rerateProgressEvery is the least time between two progress lines of a
// re-rating's stream.
const rerateProgressEvery = time.Second

// RerateLine is one line of POST /admin/v1/rerate's answer when the
// client accepts application/x-ndjson: a Progress line at most once a
// second while batches commit, then one last line with Result (what the
// committed batches did) and, when the re-rating stopped short, Error
// (the code and message its JSON answer would have had: EConflict naming
// an event the price book cannot rate, say).
type RerateLine struct {
	Progress *ledger.RerateProgress `json:"progress,omitempty"`
	Result   *ledger.RerateResult   `json:"result,omitempty"`
	Error    *ErrorBody             `json:"error,omitempty"`
}

// ErrorBody is the error envelope's content: a ledger error code
// (ledger.EInvalid, …) and its message, for people.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// rerate serves POST /admin/v1/rerate {"from", "to"}, both required. A
// re-rating takes minutes on a month of a busy ledger (about 7,000
// adjusted events a second, BENCHMARKS.md), so a client that accepts
// application/x-ndjson is answered as it goes (RerateLine); any other gets
// the result as one JSON object at the end. A client that goes away stops
// the re-rating after the batch in flight: what committed stays, and
// re-rating the range again finishes it.
func (a *Admin) rerate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	from, to, err := requiredRange(in.From, in.To)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !accepts(r, ndjson) {
		res, err := a.store.Rerate(r.Context(), from, to, nil)
		a.respond(w, r, http.StatusOK, res, err)
		return
	}
	w.Header().Set("Content-Type", ndjson) // no-store and nosniff: private, as every answer here
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	line := func(l RerateLine) {
		b, _ := json.Marshal(l) // counts, a time and strings: never fails
		_, _ = w.Write(append(b, '\n'))
		_ = rc.Flush()
	}
	line(RerateLine{Progress: &ledger.RerateProgress{Through: from}})
	last := time.Now()
	res, err := a.store.Rerate(r.Context(), from, to, func(p ledger.RerateProgress) {
		if now := time.Now(); now.Sub(last) >= rerateProgressEvery {
			last = now
			line(RerateLine{Progress: &p})
		}
	})
	if err != nil && r.Context().Err() != nil {
		a.log.Info("rerate stopped: its client went away", "from", from, "to", to,
			"examined", res.Examined, "adjusted", res.Adjusted)
		return
	}
	end := RerateLine{Result: &res}
	if err != nil {
		code, msg := a.errorAnswer(r, err)
		end.Error = &ErrorBody{Code: code, Message: msg}
	}
	line(end)
}

// accepts reports whether r's Accept header names mediaType (exactly, with
// any parameters, at a q above 0).
func accepts(r *http.Request, mediaType string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || !strings.EqualFold(mt, mediaType) {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); err != nil || q > 0 { // no q is q=1
				return true
			}
		}
	}
	return false
}
