package metrics

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// APIRequests counts the operator's own requests to the Kubernetes API by verb and resource.
// client-go's rest_client_requests_total has the HTTP method only, which cannot say which object a
// write at steady state went to; the resource (with its subresource) can, and both labels take
// values from a fixed set.
var APIRequests = Def{"steward_kube_api_requests_total", Counter,
	"Requests the operator sent to the Kubernetes API, by verb (get, list, watch, create, update, patch, delete, deletecollection) and resource (`pods`, `etcdclusters.etcd.steward.dev/status`, …; `other` for non-resource paths).",
	[]string{"verb", "resource"}}

// APICounter wraps a client's transport and counts what goes through it.
type APICounter struct {
	vec *prometheus.CounterVec
}

// Wrap is a rest.Config WrapTransport.
func (c *APICounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		verb, resource := RequestAttributes(req.Method, req.URL)
		c.vec.WithLabelValues(verb, resource).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// RequestAttributes reads the Kubernetes verb and resource from a request, the way the API server's
// request info does for the paths a controller uses: /api/v1/…, /apis/GROUP/VERSION/…, each
// optionally under namespaces/NS/, then RESOURCE[/NAME[/SUBRESOURCE]].
func RequestAttributes(method string, u *url.URL) (verb, resource string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return strings.ToLower(method), "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	named := len(parts) >= 2
	switch method {
	case http.MethodGet:
		switch {
		case named:
			verb = "get"
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}
