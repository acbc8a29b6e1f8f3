package console

import (
	"net/http"

	"go.uber.org/zap"
	"google.golang.org/grpc/status"
)

// audit logs one change asked through the console: who (the session's operator name
// and client address), what (action), which target, the change's own fields, and
// whether accounting made it. Callers pass no secret: a key's secret and the admin
// token never reach a log.
func (s *Server) audit(r *http.Request, se *session, action, target string, err error, fields ...zap.Field) {
	fields = append([]zap.Field{zap.String("operator", se.operator), zap.String("remote", clientAddr(r)),
		zap.String("action", action), zap.String("target", target)}, fields...)
	if err != nil {
		s.log.Warn("console change failed", append(fields, zap.String("code", status.Code(err).String()))...)
		return
	}
	s.log.Info("console change", fields...)
}

// auditRefused logs a change the console itself refused (a form already submitted, or
// one it never issued): nothing reached accounting.
func (s *Server) auditRefused(r *http.Request, se *session, action, target string, why formRefusal) {
	s.log.Warn("console change refused", zap.String("operator", se.operator), zap.String("remote", clientAddr(r)),
		zap.String("action", action), zap.String("target", target), zap.String("why", string(why)))
}
