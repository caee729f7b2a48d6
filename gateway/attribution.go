package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Attribution headers, accepted on every metered endpoint. They win over
// the body's fields, so an integrator can attribute requests whose bodies
// it does not build.
const (
	// HeaderEndUser names the end user a request is made for.
	HeaderEndUser = "X-Tollgate-End-User"
	// HeaderMetadata holds tags of the request: a JSON object of strings,
	// such as {"team":"search","feature":"autocomplete"}.
	HeaderMetadata = "X-Tollgate-Metadata"
)

// attribution is the end user and the tags a request names: the body's
// (endUser; the string values of metadata, a JSON object, others ignored,
// as they are not tags), then the headers'. A header beyond the bounds
// (usage.MaxEndUserLen and the metadata limits) or not what it should be
// is the client's error (400). The body's fields are the upstream's to
// judge: beyond the bounds they are cut when the event is made, and the
// cut is recorded on the event.
func attribution(r *http.Request, endUser string, metadata json.RawMessage) (string, map[string]string, error) {
	var tags map[string]string
	if len(metadata) > 0 {
		var all map[string]any
		if json.Unmarshal(metadata, &all) == nil {
			for k, v := range all {
				if s, ok := v.(string); ok {
					if tags == nil {
						tags = make(map[string]string, len(all))
					}
					tags[k] = s
				}
			}
		}
	}
	if h := r.Header.Values(HeaderEndUser); len(h) > 0 {
		if err := usage.CheckString(h[0], usage.MaxEndUserLen); err != nil {
			return "", nil, fmt.Errorf("%s: %v", HeaderEndUser, err)
		}
		endUser = h[0]
	}
	if h := r.Header.Values(HeaderMetadata); len(h) > 0 {
		var more map[string]string
		if err := json.Unmarshal([]byte(h[0]), &more); err != nil || more == nil {
			return "", nil, fmt.Errorf("%s: must be a JSON object of string values, such as {\"team\":\"search\"}", HeaderMetadata)
		}
		if len(more) > usage.MaxMetadataPairs {
			return "", nil, fmt.Errorf("%s: holds %d tags; at most %d are kept", HeaderMetadata, len(more), usage.MaxMetadataPairs)
		}
		if tags == nil {
			tags = make(map[string]string, len(more))
		}
		for k, v := range more {
			if err := usage.CheckString(k, usage.MaxMetadataKeyLen); err != nil {
				return "", nil, fmt.Errorf("%s: key %q %v", HeaderMetadata, k, err)
			}
			if err := usage.CheckString(v, usage.MaxMetadataValueLen); err != nil {
				return "", nil, fmt.Errorf("%s: value of %q %v", HeaderMetadata, k, err)
			}
			tags[k] = v
		}
	}
	return endUser, tags, nil
}

// stringField is a JSON string's value, or "" for anything else.
func stringField(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
