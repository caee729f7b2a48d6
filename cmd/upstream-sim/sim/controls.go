package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDelay bounds sim_delay_ms.
const maxDelay = 10 * time.Minute

// faultKind is the fault that changes how a stream ends.
type faultKind uint8

const (
	faultNone        faultKind = iota
	faultDisconnect            // disconnect_after:N
	faultErrorAfter            // error_after:N
	faultStall                 // stall
	faultStallBefore           // stall_before
)

// fault is a parsed sim_fault value.
type fault struct {
	kind          faultKind
	after         int64 // content chunks before disconnect_after or error_after
	noUsage       bool
	usageInFinish bool
	cumulative    bool
	noDone        bool
	usageInError  bool // usage_in_error: error_after's frame carries the usage billed
	negativeUsage bool // negative_usage: OpenAI's usage objects report every count negated
}

// plan is everything the simulator will do for one request.
type plan struct {
	id            string
	created       int64  // Unix seconds
	model         string // the model name asked for (it sets the usage profile)
	modelJSON     []byte // the model name the response reports (sim_served_model), as a JSON string
	stream        bool
	includeUsage  bool // OpenAI stream_options.include_usage
	thoughts      bool // Gemini: stream thought parts
	capped        bool // the length came from a cap
	usage         Usage
	contentTokens int64 // completion minus reasoning tokens
	chunks        int64 // content chunks, 1..contentTokens
	delay         time.Duration
	status        int // sim_status, 0 when unset
	fault         fault
	// toolCall, when set (sim_tool_call), is the function an OpenAI
	// answer calls instead of writing content: its arguments are
	// {"text":"tok tok ..."}, one "tok " per content token, so the usage
	// is unchanged; finish_reason "tool_calls".
	toolCall string
}

// newPlan applies the controls in sp and h (the header wins) to the request
// sp parsed from body. Its errors are client errors.
func newPlan(c codec, sp *spec, body []byte, h http.Header, now time.Time) (*plan, error) {
	model, _ := json.Marshal(sp.model)
	p := &plan{
		id:            ResponseID(c.protocol(), body),
		created:       now.Unix(),
		model:         sp.model,
		modelJSON:     model,
		stream:        sp.stream,
		includeUsage:  sp.includeUsage,
		thoughts:      sp.thoughts,
		capped:        sp.capped,
		usage:         sp.usage,
		contentTokens: sp.usage.CompletionTokens - sp.usage.ReasoningTokens,
	}
	get := func(key, header string) string {
		if v := h.Get(header); v != "" {
			return v
		}
		return sp.controls[key]
	}
	p.chunks = p.contentTokens
	if v := get("sim_chunks", "X-Sim-Chunks"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("sim_chunks must be a positive integer, got %q", v)
		}
		p.chunks = min(n, p.contentTokens)
	}
	if v := get("sim_delay_ms", "X-Sim-Delay-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxDelay {
			return nil, fmt.Errorf("sim_delay_ms must be an integer from 0 to %d, got %q", maxDelay.Milliseconds(), v)
		}
		p.delay = time.Duration(ms) * time.Millisecond
	}
	if v := get("sim_served_model", "X-Sim-Served-Model"); v != "" {
		p.modelJSON, _ = json.Marshal(v) // a NUL goes out as \u0000, invalid UTF-8 as U+FFFD
	}
	if v := get("sim_tool_call", "X-Sim-Tool-Call"); v != "" {
		switch {
		case c.protocol() != OpenAI:
			return nil, errors.New("sim_tool_call applies to Chat Completions only")
		case v == "1" || v == "true":
			p.toolCall = sp.toolName
		default:
			p.toolCall = v
		}
		if p.toolCall == "" {
			p.toolCall = "tool"
		}
	}
	if v := get("sim_status", "X-Sim-Status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 400 || n > 599 {
			return nil, fmt.Errorf("sim_status must be an HTTP status from 400 to 599, got %q", v)
		}
		p.status = n
	}
	if v := get("sim_fault", "X-Sim-Fault"); v != "" {
		var err error
		if p.fault, err = parseFault(v); err != nil {
			return nil, err
		}
		if err := c.check(p.fault); err != nil {
			return nil, err
		}
		p.fault.after = min(p.fault.after, p.chunks)
	}
	return p, nil
}

// last reports whether content chunk i (from 0) is the last one of a stream
// that finishes: false when disconnect_after or error_after cuts the stream
// after every content chunk.
func (p *plan) last(i int64) bool {
	cut := p.fault.kind == faultDisconnect || p.fault.kind == faultErrorAfter
	return i+1 == p.chunks && !(cut && p.fault.after == p.chunks)
}

// reported is usage u as the response reports it: every count negated
// under negative_usage (OpenAI only; /stats still bills u).
func (p *plan) reported(u Usage) Usage {
	if !p.fault.negativeUsage {
		return u
	}
	return Usage{PromptTokens: -u.PromptTokens, CachedTokens: -u.CachedTokens,
		CompletionTokens: -u.CompletionTokens, ReasoningTokens: -u.ReasoningTokens}
}

// parseFault parses a comma-separated list of fault modes.
func parseFault(v string) (fault, error) {
	var f fault
	for _, mode := range strings.Split(v, ",") {
		mode = strings.TrimSpace(mode)
		name, arg, hasArg := strings.Cut(mode, ":")
		kind := faultNone
		switch name {
		case "disconnect_after":
			kind = faultDisconnect
		case "error_after":
			kind = faultErrorAfter
		case "stall":
			kind = faultStall
		case "stall_before":
			kind = faultStallBefore
		case "no_usage":
			f.noUsage = true
		case "usage_in_finish":
			f.usageInFinish = true
		case "cumulative_usage":
			f.cumulative = true
		case "no_done":
			f.noDone = true
		case "usage_in_error":
			f.usageInError = true
		case "negative_usage":
			f.negativeUsage = true
		default:
			return fault{}, fmt.Errorf("sim_fault: unknown mode %q", mode)
		}
		needArg := kind == faultDisconnect || kind == faultErrorAfter
		if hasArg != needArg {
			if needArg {
				return fault{}, fmt.Errorf("sim_fault: mode %q needs a count, as in %s:N", mode, name)
			}
			return fault{}, fmt.Errorf("sim_fault: mode %q takes no argument", mode)
		}
		if kind == faultNone {
			continue
		}
		if f.kind != faultNone {
			return fault{}, fmt.Errorf("sim_fault: at most one of disconnect_after, error_after, stall, stall_before, got %q", v)
		}
		f.kind = kind
		if needArg {
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n < 0 {
				return fault{}, fmt.Errorf("sim_fault: mode %q: N must be a non-negative integer", mode)
			}
			f.after = n
		}
	}
	return f, nil
}
