package lifecycle

import "go.uber.org/zap"

// log is the logger of every line about this request: each carries Envoy's x-request-id
// as request_id (empty before the request headers arrived), the id the client got back
// in its response and the one the settlement record is found by.
func (r *Request) log() *zap.Logger { return r.svc.cfg.Log.With(r.idField()) }

// idField is the request_id field of every line about this request (r.log's, and the
// settlement record's, which is logged without a logger of the request's own).
func (r *Request) idField() zap.Field { return zap.String("request_id", r.requestID) }
