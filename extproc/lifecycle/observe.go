package lifecycle

// Read-only accessors for observers (metrics, logs). They never change the request.

// Endpoint returns the request's endpoint; EndpointUnknown until the request headers
// named a known route.
func (r *Request) Endpoint() Endpoint { return r.endpoint }

// ModelID returns the catalog id of the model the request resolved to or, before
// admission resolved it, the model id the body asked for (untrusted, possibly not in
// the catalog: observers must bound it); "" when no body was parsed.
func (r *Request) ModelID() string {
	if r.model != nil {
		return r.model.ID
	}
	return r.parsed.Model
}
