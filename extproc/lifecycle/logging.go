package lifecycle

import "go.uber.org/zap"

// log is the logger of every line about this request: each carries Envoy's x-request-id
// as request_id (empty before the request headers arrived), the id the client got back
// in its response and the one the settlement record is found by.
func (r *Request) log() *zap.Logger {
	return r.svc.cfg.Log.With(zap.String("request_id", r.requestID))
}
