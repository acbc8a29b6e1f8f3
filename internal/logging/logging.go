// Package logging builds the one zap logger configuration every process of the gateway
// uses (extproc, accounting, the Envoy test front, the mock providers): JSON lines at
// info level, with "ts" in RFC 3339 in UTC with nanoseconds (time.RFC3339Nano), so logs
// of all processes sort and join on one time format. The processes on the request path
// (extproc, accounting) log through Buffered. It imports nothing of the gateway.
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

// New returns the JSON logger named name writing each line to w as it is logged
// (internal errors of zap too).
func New(w io.Writer, name string) *zap.Logger {
	return newLogger(zapcore.Lock(zapcore.AddSync(w)), name)
}

// Buffering of Buffered's lines: they are written to w once BufferSize bytes wait, and
// at least every FlushInterval.
const (
	BufferSize    = 64 << 10
	FlushInterval = 100 * time.Millisecond
)

// Buffered returns New's logger with its lines buffered in memory (BufferSize,
// FlushInterval), for the processes on the request path: a line written on its own costs
// the request that logs it a system call (extproc's settlement line: ≈6 % of its CPU at
// 1,000 requests/s) and wakes whatever reads the log. The logger's Sync writes out what
// waits (it does not fsync w). stop writes out what waits and ends the flushing; call it
// before the process exits: lines still buffered when a process is killed are lost.
func Buffered(w io.Writer, name string) (log *zap.Logger, stop func()) {
	out := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(writeOnly{w}), Size: BufferSize, FlushInterval: FlushInterval}
	return newLogger(out, name), func() { _ = out.Stop() }
}

// writeOnly hides w's Sync (an *os.File's is fsync): a flush only writes.
type writeOnly struct{ w io.Writer }

func (o writeOnly) Write(p []byte) (int, error) { return o.w.Write(p) }

func newLogger(out zapcore.WriteSyncer, name string) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = func(t time.Time, pe zapcore.PrimitiveArrayEncoder) {
		pe.AppendString(t.UTC().Format(TimeFormat))
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), out, zap.InfoLevel)
	return zap.New(core, zap.ErrorOutput(out)).Named(name)
}

// Std returns a standard-library logger that writes through New(w, name) at info level,
// for http.Server.ErrorLog and code written against *log.Logger.
func Std(w io.Writer, name string) *log.Logger {
	return zap.NewStdLog(New(w, name))
}
