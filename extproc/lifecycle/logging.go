package lifecycle

import "go.uber.org/zap"

// log is the logger of every line about this request: each carries Envoy's x-request-id
// as request_id (empty before the request headers arrived), the id the client got back
// in its response and the one the settled line is found by.
func (r *Request) log() *zap.Logger { return r.svc.cfg.Log.With(requestIDField(r.requestID)) }

// requestIDField is the request_id field of every line about a request (r.log's, and the
// settlement log's, which logs from the request's Record without a logger of its own).
func requestIDField(id string) zap.Field { return zap.String("request_id", id) }
