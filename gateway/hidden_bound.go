package gateway

import (
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// estimate is the hidden reasoning, in tokens, to add to a request of
// customer's to model whose usage the provider never reported, after
// visible output tokens were counted (exchange.addHiddenReasoning; a
// crashed request's is expected's, bounded by Recover the same way but for
// "minimal"). body is the request as sent to path. It
// is hiddenReasoning's figure for the reasoning the request asked for:
//   - none when it turned reasoning off (reasoningEffort: effort "none", a
//     Gemini thinkingBudget of 0): the model spent none, whatever this
//     customer's other requests did (a review: the median floor billed such
//     requests other customers' reasoning);
//   - the customer's own average when it asked for the least (effort
//     "minimal"), the median when it has none;
//   - otherwise the larger of the two (see hiddenReasoning: a customer
//     cannot lower its own below the median);
//
// and never more than the request's stated output limit leaves after the
// output (statedOutputLimit: reasoning counts against max_completion_tokens,
// Responses' max_output_tokens, Gemini's maxOutputTokens).
func (h *hiddenReasoning) estimate(customer, model string, body []byte, path string, visible int64) int64 {
	own, hasOwn, median := h.averages(customer, model)
	if own <= 0 && median <= 0 {
		return 0
	}
	est := median
	switch effort := reasoningEffort(body, path); {
	case effort == effortOff:
		return 0
	case hasOwn && effort == effortLeast:
		est = own
	case hasOwn:
		est = max(own, median)
	}
	if limit, ok := statedOutputLimit(body, path); ok {
		est = min(est, limit-visible)
	}
	return max(est, 0)
}

// An effort is how much reasoning a request asked for, as the estimate
// reads it.
type effort int

const (
	effortAsked effort = iota // any, or none said: the model's to choose
	effortLeast               // OpenAI's "minimal"
	effortOff                 // OpenAI's "none", a Gemini thinkingBudget of 0
)

// reasoningEffort reads the reasoning a request body sent to path asked
// for: chat's reasoning_effort, Responses' reasoning.effort (OpenAI's
// documented fields; "none" turns it off on the models that take it,
// "minimal" is the least otherwise), Gemini's
// generationConfig.thinkingConfig.thinkingBudget (0 turns thinking off). A
// member is read as the upstream's encoding/json reads it: its last
// occurrence; a name not spelt exactly is not read (effortAsked, the
// estimate that bills more).
func reasoningEffort(body []byte, path string) effort {
	switch p := pathOnly(path); {
	case strings.HasSuffix(p, "/chat/completions"):
		return effortNamed(member(body, "reasoning_effort"))
	case strings.HasSuffix(p, "/responses"):
		return effortNamed(member(member(body, "reasoning"), "effort"))
	case strings.HasSuffix(p, "enerateContent"):
		config := member(body, "generationConfig")
		if config == nil {
			config = member(body, "generation_config")
		}
		thinking := member(config, "thinkingConfig")
		if thinking == nil {
			thinking = member(config, "thinking_config")
		}
		budget := member(thinking, "thinkingBudget")
		if budget == nil {
			budget = member(thinking, "thinking_budget")
		}
		if string(budget) == "0" {
			return effortOff
		}
	}
	return effortAsked
}

// effortNamed is the effort a JSON string value names.
func effortNamed(v []byte) effort {
	var s string
	if v == nil || json.Unmarshal(v, &s) != nil {
		return effortAsked
	}
	switch s {
	case "none":
		return effortOff
	case "minimal":
		return effortLeast
	}
	return effortAsked
}

// member is obj's top-level member key's raw value (its last), or nil.
func member(obj []byte, key string) []byte {
	if obj == nil {
		return nil
	}
	v, ok, err := jsonscan.Member(obj, key)
	if !ok || err != nil {
		return nil
	}
	return v
}

// pathOnly is path without its query.
func pathOnly(path string) string {
	p, _, _ := strings.Cut(path, "?")
	return p
}
