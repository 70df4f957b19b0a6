package cli

import (
	"encoding/json"
	"sort"
	"strings"
)

// encodeResult is res as one JSON line of at most MaxResult bytes. The free-text fields (error,
// message) are shortened to fit, keeping their beginning, which says what failed.
func encodeResult(res map[string]any) []byte {
	line := marshalLine(res)
	for _, field := range []string{"error", "message"} {
		s, ok := res[field].(string)
		if !ok || len(line) <= MaxResult {
			continue
		}
		// The longest prefix that fits (JSON escaping makes the encoded length hard to predict).
		n := sort.Search(len(s)+1, func(n int) bool {
			res[field] = shorten(s, n)
			return len(marshalLine(res)) > MaxResult
		}) - 1
		res[field] = shorten(s, max(n, 0))
		line = marshalLine(res)
	}
	if len(line) > MaxResult { // cannot happen with Steward's results; keep the contract anyway
		line = marshalLine(map[string]any{"error": "result too large for a termination message"})
	}
	return line
}

// shorten is the first n bytes of s (not cutting a character) and an ellipsis.
func shorten(s string, n int) string {
	if n >= len(s) {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func marshalLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": "encoding the result: " + err.Error()})
	}
	return append(b, '\n')
}
