package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// The OpenAI endpoints beside chat completions: /v1/embeddings and the
// legacy /v1/completions, metered like chat; and the providers'
// token-counting endpoints, relayed unmetered.

// openAIRoute reads and routes an OpenAI request to endpoint: its body,
// which must name required (a non-null field), its parse, route,
// attribution and attempts on the deployments whose provider serves
// (serves), prepared by prep. It answers the client itself and returns
// false when it cannot go on.
func (s *Server) openAIRoute(w http.ResponseWriter, r *http.Request, required, endpoint string,
	serves func(*provider.Provider) bool, prep func(p *provider.Provider, a attempt, req *chatRequest, body []byte) (string, []byte, error),
) (body []byte, req *chatRequest, endUser string, tags map[string]string, attempts []prepared, ok bool) {
	body, ok = s.readRequest(w, r, chatErrors)
	if !ok {
		return
	}
	ok = false
	req, err := parseOpenAIRequest(body)
	if err == nil {
		err = req.checkPassedKeys(body)
	}
	if err == nil {
		// The estimate reads required (input, prompt) by its exact key,
		// while a translated provider's request is made from the body as
		// encoding/json reads it ("Input" too, the last one winning), and
		// Gemini's embeddings report no usage: the estimate is the bill.
		err = provider.CheckPassedBody(body, required)
	}
	if err == nil && isNull(req.fields[required]) {
		err = fmt.Errorf("%s: is required", required)
	}
	if err == nil {
		err = checkModel(req.model)
	}
	if err != nil {
		chatErrors.WriteError(w, badRequest(err.Error()))
		return
	}
	rt, ok := s.permittedRoute(w, r, req.model)
	if !ok {
		return
	}
	endUser = stringField(req.fields["user"])
	if endUser, tags, err = attribution(r, endUser, req.fields["metadata"]); err != nil {
		chatErrors.WriteError(w, badRequest(err.Error()))
		return
	}
	key := keyOf(r)
	attempts, err = s.prepareAttempts(key, rt, func(model string, d *deployment) bool {
		p := s.providers[d.provider.Type]
		return p != nil && serves(p) && allowedModel(key, model, deploymentRoute(model, d))
	}, func(a attempt) (string, []byte, error) {
		return prep(s.providers[a.dep.provider.Type], a, req, body)
	})
	if errors.Is(err, errNoRoute) {
		chatErrors.WriteError(w, provider.Err(http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("the model %q is not served by a provider with %s here", req.model, endpoint)))
		return
	}
	if err != nil {
		chatErrors.WriteError(w, attemptsError(err))
		return
	}
	return body, req, endUser, tags, attempts, true
}

// embeddings serves POST /v1/embeddings: OpenAI's embeddings API on every
// provider with one (provider.Embeddings), translated where it differs.
// An event's usage is its input tokens (prompt_tokens), priced per 1M
// input tokens like any prompt; the provider's count when it reports one,
// else a tokenizer estimate of the input (usage_source estimated). A
// provider that takes fewer inputs in one call than OpenAI's API
// (provider.EmbeddingBatches: Gemini, 100) gets the request as batches,
// one after another, on the attempt's one exchange: its timers, journal
// and failover as for one call, the answers joined in input order, and a
// failed batch fails the attempt, billing the batches embedded before it.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	body, req, endUser, tags, attempts, ok := s.openAIRoute(w, r, "input", "/v1/embeddings",
		func(p *provider.Provider) bool { return p.Embeddings != nil },
		func(p *provider.Provider, a attempt, _ *chatRequest, body []byte) (string, []byte, error) {
			return p.Embeddings.Request(body, a.dep.upstream)
		})
	if !ok {
		return
	}
	input := req.fields["input"]
	var format string
	base64Asked := json.Unmarshal(req.fields["encoding_format"], &format) == nil && format == "base64"
	s.serveAttempts(w, r, attempts, "/v1/embeddings", false, chatErrors, func(x *exchange, p prepared) {
		x.event.EndUser, x.event.Metadata = endUser, tags
		emb := s.providers[p.dep.provider.Type].Embeddings
		bodies, inputs := embeddingBatches(emb, p.body)
		// The estimate counts the whole input (one call, or every batch
		// embedded), else the inputs of the batches embedded so far.
		whole, done := len(bodies) == 1, 0
		x.promptText = func() tap.Prompt {
			if whole {
				return inputPrompt(input)
			}
			return inputPrompt(firstInputs(input, done))
		}
		x.begin(body)
		var outs [][]byte
		var header http.Header
		for i, upBody := range bodies {
			if i > 0 {
				// The last batch's body was read: the next one's wait
				// for its headers is bounded as the first's was
				// (callUpstream), not by the stall timer.
				x.stallOff.Store(true)
				x.stall.Stop()
				x.touch()
			}
			out, h, ok := s.embeddingsCall(x, p, upBody, req.model)
			if !ok {
				return
			}
			if len(bodies) > 1 {
				// The provider embedded (and bills) this batch's inputs: a
				// later batch's failure bills them (estimated), not the
				// whole input and not nothing (see Report.Began).
				done += inputs[i]
				x.report.Began = true
				x.stallOff.Store(false)
			}
			outs, header = append(outs, out), h
		}
		whole = true
		out, err := joinEmbeddings(outs, inputs)
		if err == nil && base64Asked {
			// A translated provider's number arrays, as the client asked.
			out, err = openai.Base64Embeddings(out)
		}
		if err != nil {
			status, eventStatus := x.failure()
			x.fail(status, eventStatus, err)
			return
		}
		x.firstByte()
		x.markComplete()
		x.httpStatusOK()
		if !x.commitAnswer() {
			return
		}
		// The usage the event records, in the response, when the upstream's
		// is not there to read: an estimate, or a report whose members
		// Body removed (Embeddings.Body); or when it is not what was billed
		// (a count the gateway corrected: reportedAsBilled). An error body
		// gets none.
		if _, exact, _ := jsonscan.Member(out, "usage"); x.report.Error == "" && (!x.report.Reported || !exact || !reportedAsBilled(x.event)) {
			n := strconv.AppendInt(nil, x.event.Usage.PromptTokens, 10)
			u := append(append(append(append([]byte(`{"prompt_tokens":`), n...), `,"total_tokens":`...), n...), '}')
			if b, err := jsonscan.SetMember(out, "usage", u); err == nil {
				out = b
			}
		}
		out = x.withCost(out)
		if x.respond(http.StatusOK, false, func(h http.Header) {
			h.Set("Content-Type", "application/json")
			passHeaders(h, header)
			x.setCostHeaders(h)
		}) {
			x.write(out)
		}
	})
}

// embeddingsCall makes one upstream call of an embeddings request's
// attempt p, upBody its body (the whole request, or one batch of it), and
// returns its answer in OpenAI's form with the upstream's headers; or,
// having failed the exchange (its answer to the client, or the next
// attempt), reports false.
func (s *Server) embeddingsCall(x *exchange, p prepared, upBody []byte, model string) ([]byte, http.Header, bool) {
	resp := s.callUpstream(x, p.route(), p.path, upBody, nil)
	if resp == nil {
		return nil, nil, false
	}
	defer resp.Body.Close()
	raw, err := s.readBody(x, resp.Body)
	out := raw
	if err == nil {
		out, err = s.providers[p.dep.provider.Type].Embeddings.Body(raw, model, &x.report)
	}
	if err != nil {
		status, eventStatus := x.failure()
		if x.report.Error != "" && !serverSide(raw) {
			// A translated error object under a 200 naming the
			// client's side: its answer, no failover, no cool-down
			// (as translateBody answers it on the chat route).
			x.failHere(status, eventStatus, err)
			return nil, nil, false
		}
		x.fail(status, eventStatus, err)
		return nil, nil, false
	}
	if x.errorUnder200(raw) {
		return nil, nil, false // an error object, the provider's failure: the next attempt serves
	}
	return out, resp.Header, true
}

// embeddingBatches is the upstream bodies of an embeddings request whose
// upstream body is upBody: upBody alone, or the batches its provider
// splits it into (provider.EmbeddingBatches) with the number of inputs of
// each.
func embeddingBatches(emb provider.Embeddings, upBody []byte) ([][]byte, []int) {
	if b, ok := emb.(provider.EmbeddingBatches); ok {
		if bodies, inputs, err := b.Split(upBody); err == nil && len(bodies) > 0 {
			return bodies, inputs
		}
	}
	return [][]byte{upBody}, nil
}

// firstInputs is the first n strings of an embeddings input that is an
// array of strings, as JSON.
func firstInputs(input json.RawMessage, n int) json.RawMessage {
	var many []string
	if json.Unmarshal(input, &many) != nil {
		return input
	}
	b, _ := json.Marshal(many[:min(n, len(many))])
	return b
}

// joinEmbeddings joins the OpenAI embeddings answers of a request's
// batches, in order, into one: the first's, its data the batches' in
// order, each index the embedding's place in the whole input. A batch
// that answered another number of embeddings than inputs[i], its number of
// inputs, is an error: every later embedding would be labelled with
// another input's index.
func joinEmbeddings(outs [][]byte, inputs []int) ([]byte, error) {
	if len(outs) == 1 {
		return outs[0], nil
	}
	type item struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}
	var all []item
	for i, out := range outs {
		var list struct {
			Data []item `json:"data"`
		}
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, err
		}
		if i < len(inputs) && len(list.Data) != inputs[i] {
			return nil, fmt.Errorf("the upstream answered %d embeddings for batch %d of %d, which has %d inputs",
				len(list.Data), i+1, len(outs), inputs[i])
		}
		for _, it := range list.Data {
			it.Index = len(all)
			all = append(all, it)
		}
	}
	data, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	return jsonscan.SetMember(outs[0], "data", data)
}

// completions serves POST /v1/completions, OpenAI's legacy completions,
// streamed and not, on OpenAI-compatible providers (provider.Completions):
// passed through and metered as chat completions are (the usage chunk
// only when asked for, usage always asked of the upstream).
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	body, req, endUser, tags, attempts, ok := s.openAIRoute(w, r, "prompt", "/v1/completions",
		func(p *provider.Provider) bool { return p.Completions },
		func(_ *provider.Provider, a attempt, req *chatRequest, _ []byte) (string, []byte, error) {
			b, err := req.upstreamBody(a.dep.upstream)
			return "/completions", b, err
		})
	if !ok {
		return
	}
	prompt := req.fields["prompt"]
	s.serveAttempts(w, r, attempts, "/v1/completions", req.stream, chatErrors, func(x *exchange, p prepared) {
		x.event.EndUser, x.event.Metadata = endUser, tags
		x.promptText = func() tap.Prompt { return inputPrompt(prompt) }
		// oneChoice stays false: an array of prompts gets a choice each.
		x.begin(body)
		resp := s.callUpstream(x, p.route(), p.path, p.body, nil)
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		if req.stream && jsonAnswer(resp.Header) {
			s.relayAnswerAsStream(x, resp, nil, req.includeUsage, req.model)
			return
		}
		if req.stream {
			s.relayChatStream(x, resp, req.includeUsage, req.model, nil)
			return
		}
		s.relayChatBody(x, resp, nil, req.model)
	})
}

// inputPrompt is what an estimate counts of an embeddings input or a
// completions prompt: its text (a string, or an array of strings, each
// counted on its own, as the provider reads each), or the
// number of token ids it holds (an array of tokens, or of token arrays,
// which OpenAI's API takes as already tokenized input).
func inputPrompt(raw json.RawMessage) tap.Prompt {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return tap.Prompt{Text: one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return tap.Prompt{Texts: many}
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return tap.Prompt{Tokens: int64(len(ids))}
	}
	var arrays [][]int64
	_ = json.Unmarshal(raw, &arrays)
	n := int64(0)
	for _, a := range arrays {
		n += int64(len(a))
	}
	return tap.Prompt{Tokens: n}
}
