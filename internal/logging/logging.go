// Package logging builds the one zap logger configuration every process of the gateway
// uses (extproc, accounting, the Envoy test front, the mock providers): JSON lines at
// info level, with "ts" in RFC 3339 in UTC with nanoseconds (time.RFC3339Nano), so logs
// of all processes sort and join on one time format.
package logging

import (
	"io"
	"log"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TimeFormat is the layout of every log timestamp (always UTC).
const TimeFormat = time.RFC3339Nano

// New returns the JSON logger named name writing to w (internal errors of zap too).
func New(w io.Writer, name string) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = func(t time.Time, pe zapcore.PrimitiveArrayEncoder) {
		pe.AppendString(t.UTC().Format(TimeFormat))
	}
	out := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), out, zap.InfoLevel)
	return zap.New(core, zap.ErrorOutput(out)).Named(name)
}

// Std returns a standard-library logger that writes through New(w, name) at info level,
// for http.Server.ErrorLog and code written against *log.Logger.
func Std(w io.Writer, name string) *log.Logger {
	return zap.NewStdLog(New(w, name))
}
