package gemini

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// ModelFromPath parses the native route's "models/{model}:{method}" (a
// leading "/" and a query are allowed), where method is
// "streamGenerateContent" or "generateContent", as Google's REST paths
// name them (POST /v1beta/{model=models/*}:generateContent). p is the
// escaped path (url.URL.EscapedPath): model is returned unescaped. ok is
// false for any other method, an empty model, a model that begins or ends
// with "/", or one holding ":" (an escaped one, "%3A"): the colon separates
// the method, and a model "m:countTokens" would put two methods in the
// upstream's path, one of which the gateway does not meter.
func ModelFromPath(p string) (model, method string, ok bool) {
	p, _, _ = strings.Cut(p, "?")
	rest, found := strings.CutPrefix(strings.TrimPrefix(p, "/"), "models/")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", "", false
	}
	model, method = rest[:i], rest[i+1:]
	if method != "streamGenerateContent" && method != "generateContent" {
		return "", "", false
	}
	model, err := url.PathUnescape(model)
	// A "/" is allowed: "provider/model" names route like everywhere else.
	if err != nil || model == "" || strings.HasPrefix(model, "/") || strings.HasSuffix(model, "/") || strings.Contains(model, ":") {
		return "", "", false
	}
	return model, method, true
}

// promptRequest is what PromptText reads of a GenerateContentRequest. The
// Gemini API takes each field by its JSON name (systemInstruction) or its
// proto name (system_instruction), as Google's REST examples write them:
// both are read, so that a request in either spelling is estimated whole.
type promptRequest struct {
	SystemInstruction      *promptContent  `json:"systemInstruction"`
	SystemInstructionProto *promptContent  `json:"system_instruction"`
	Contents               []promptContent `json:"contents"`
	Tools                  json.RawMessage `json:"tools"`
}

type promptContent struct {
	Parts []struct {
		Text          string        `json:"text"`
		InlineData    *struct{}     `json:"inlineData"` // present or not: its bytes are not kept
		InlineDataP   *struct{}     `json:"inline_data"`
		FileData      *struct{}     `json:"fileData"`
		FileDataP     *struct{}     `json:"file_data"`
		FunctionCall  *functionPart `json:"functionCall"`
		FunctionCallP *functionPart `json:"function_call"`
		FunctionResp  *functionPart `json:"functionResponse"`
		FunctionRespP *functionPart `json:"function_response"`
	} `json:"parts"`
}

// functionPart is what an estimate reads of a functionCall part (its name
// and args) or a functionResponse part (its name and response).
type functionPart struct {
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Response json.RawMessage `json:"response"`
}

// PromptText returns the text of a Gemini GenerateContentRequest that a
// tokenizer counts to estimate its prompt when the provider reports no
// usage: the systemInstruction and contents text, function call names and
// arguments, function responses, and the tools' JSON (Gemini counts
// declarations as prompt), joined by newlines (Prompt's Text). A body that
// is not JSON is returned whole, so that an estimate errs high rather than
// at zero.
func PromptText(body []byte) string { return Prompt(body).Text }

// MediaPartTokens is what an estimate counts for each media part of a
// prompt (inlineData, fileData): Gemini counts an image with both sides
// at most 384 pixels as 258 tokens, a larger one 258 per 768×768 tile,
// and a document 258 per page (Google's "Understand and count tokens"
// guide), so 258 is the least any such part costs.
const MediaPartTokens = 258

// Prompt returns PromptText's text, in Messages the contents and the
// systemInstruction (for the chat format's tokens around each, as the chat
// route counts them: tap.Estimator.Prompt), and in Media MediaPartTokens
// for each media part (inlineData, fileData) of the systemInstruction and
// contents: counted as zero, a request cut before its first usage report
// was billed its text alone, however many images or pages it sent.
func Prompt(body []byte) tap.Prompt {
	var req promptRequest
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return tap.Prompt{Text: string(body)}
		}
	}
	var b strings.Builder
	add := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	contents := req.Contents
	for _, si := range []*promptContent{req.SystemInstructionProto, req.SystemInstruction} {
		if si != nil {
			contents = append([]promptContent{*si}, contents...)
		}
	}
	var media int64
	for _, c := range contents {
		for _, p := range c.Parts {
			add(p.Text)
			if p.InlineData != nil || p.FileData != nil || p.InlineDataP != nil || p.FileDataP != nil {
				media += MediaPartTokens
			}
			for _, fc := range []*functionPart{p.FunctionCall, p.FunctionCallP} {
				if fc != nil {
					add(fc.Name)
					add(string(fc.Args))
				}
			}
			for _, fr := range []*functionPart{p.FunctionResp, p.FunctionRespP} {
				if fr != nil {
					add(fr.Name)
					add(string(fr.Response))
				}
			}
		}
	}
	if !isNull(req.Tools) {
		add(string(req.Tools))
	}
	return tap.Prompt{Text: b.String(), Messages: len(contents), Media: media}
}
