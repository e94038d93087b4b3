package providertest

import (
	"fmt"
	"net/http"
)

// WriteHTTPFault answers an HTTP fake's request with the usual form of
// fault f: 503 for FaultTransient, 410 for FaultExpired, 403 for
// FaultPermanent, a 200 whose body is the truncated malformed for
// FaultMalformed. It reports whether it answered (false for no fault:
// the fake serves the request).
func WriteHTTPFault(w http.ResponseWriter, f Fault, malformed string) bool {
	switch f {
	case FaultTransient:
		http.Error(w, "busy, try later", http.StatusServiceUnavailable)
	case FaultExpired:
		http.Error(w, "cursor gone", http.StatusGone)
	case FaultPermanent:
		http.Error(w, "forbidden", http.StatusForbidden)
	case FaultMalformed:
		fmt.Fprint(w, malformed)
	default:
		return false
	}
	return true
}
