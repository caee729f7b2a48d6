package openai

import "github.com/tollgate-dev/tollgate/meter/usage/jsonscan"

// AppendString appends s to dst as a JSON string, without allocating
// (jsonscan.AppendString: < > & kept as they are).
func AppendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }
