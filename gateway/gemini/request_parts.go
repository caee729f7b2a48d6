package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"
)

// contentPart is one element of an OpenAI content array.
type contentPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	Refusal    string          `json:"refusal"`
	ImageURL   json.RawMessage `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// contentParts translates a message's content (a string, an array of
// content parts, or null) into Gemini parts. Only user messages (media) may
// hold more than text; empty text is dropped.
func contentParts(raw json.RawMessage, field string, media bool) ([]reqPart, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s == "" {
			return nil, nil
		}
		return []reqPart{{Text: s}}, nil
	}
	var items []contentPart
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fmt.Errorf("%s: must be a string or an array of content parts", field)
	}
	var parts []reqPart
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		var p reqPart
		var err error
		switch {
		case it.Type == "text" || it.Type == "refusal":
			p.Text = it.Text + it.Refusal
		case !media:
			return nil, fmt.Errorf("%s.type: %q is not allowed here; only text is", f, it.Type)
		case it.Type == "image_url":
			p, err = imagePart(it.ImageURL, f+".image_url")
		case it.Type == "input_audio":
			a := it.InputAudio
			if a == nil || a.Data == "" || a.Format == "" {
				return nil, fmt.Errorf("%s.input_audio: must have data and format", f)
			}
			p.InlineData = &blob{MIMEType: "audio/" + a.Format, Data: a.Data}
		case it.Type == "file":
			if it.File == nil {
				return nil, fmt.Errorf("%s.file: must be an object with file_data", f)
			}
			p, err = filePart(it.File.FileData, it.File.FileID, it.File.Filename, f+".file")
		default:
			return nil, fmt.Errorf("%s.type: %q is not supported (text, image_url, input_audio, file)", f, it.Type)
		}
		if err != nil {
			return nil, err
		}
		if p.Text != "" || p.InlineData != nil || p.FileData != nil {
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// imagePart translates an image_url (an object with url, or a bare string):
// a data: URL becomes inlineData; an http(s) or gs:// URL becomes fileData
// with the MIME type its extension suggests, or "image/*" (which Gemini
// accepts for images whose exact type it sniffs) when it suggests none.
func imagePart(raw json.RawMessage, field string) (reqPart, error) {
	var u string
	if json.Unmarshal(raw, &u) != nil {
		var obj struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(raw, &obj)
		u, field = obj.URL, field+".url"
	}
	switch {
	case strings.HasPrefix(u, "data:"):
		b, err := dataURL(u, field)
		return reqPart{InlineData: b}, err
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "gs://"):
		mt := "image/*"
		if pu, err := url.Parse(u); err == nil {
			if t, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(pu.Path)), ";"); t != "" {
				mt = t
			}
		}
		return reqPart{FileData: &fileData{MIMEType: mt, FileURI: u}}, nil
	}
	return reqPart{}, fmt.Errorf("%s: must be a data: URL or an http(s) URL", field)
}

// filePart translates a file part: file_data as a data: URL, or as bare
// base64 whose type the filename's extension gives. file_id (OpenAI's Files
// API) has no Gemini equivalent.
func filePart(data, id, name, field string) (reqPart, error) {
	switch {
	case strings.HasPrefix(data, "data:"):
		b, err := dataURL(data, field+".file_data")
		return reqPart{InlineData: b}, err
	case data != "":
		mt, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(name)), ";")
		if mt == "" {
			return reqPart{}, fmt.Errorf("%s.filename: must have an extension that names the file's type", field)
		}
		return reqPart{InlineData: &blob{MIMEType: mt, Data: data}}, nil
	case id != "":
		return reqPart{}, fmt.Errorf("%s.file_id: is not supported for Gemini; send file_data", field)
	}
	return reqPart{}, fmt.Errorf("%s.file_data: must be given", field)
}

// dataURL parses an RFC 2397 data: URL into a Blob with base64 data.
func dataURL(u, field string) (*blob, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	mt, params, _ := strings.Cut(meta, ";")
	if !ok || mt == "" {
		return nil, fmt.Errorf("%s: must be a data: URL with a media type and data", field)
	}
	if !strings.Contains(";"+params+";", ";base64;") {
		raw, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
		data = base64.StdEncoding.EncodeToString([]byte(raw))
	}
	return &blob{MIMEType: mt, Data: data}, nil
}
