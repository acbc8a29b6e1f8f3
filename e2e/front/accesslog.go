package front

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// AccessLog is the connection manager's access log as the front emulates it: Envoy's
// stdout logger (envoy.access_loggers.stdout, StdoutAccessLog) with a json_format
// whose values are plain strings or exactly one command operator, among START_TIME,
// REQ(header), RESPONSE_CODE, DURATION and DYNAMIC_METADATA(namespace[:key...]). It
// writes one line per request when the request is done, as Envoy does.
//
// Envoy's JSON formatter (source/common/formatter/substitution_formatter.cc,
// JsonFormatterImpl::formatSubstitution) renders a value that is one operator with the
// operator's own type: RESPONSE_CODE and DURATION (milliseconds) as numbers, a metadata
// value as it was set (numbers, strings, objects), an unset one as null. A value mixing
// text and operators is a string; the front refuses those (not emulated).
type AccessLog struct {
	// fields are the json_format, compiled (accessline.go).
	fields []logField
}

const stdoutLoggerName = "envoy.access_loggers.stdout"

// accessLogFrom reads the HCM's access logs: none, or one stdout JSON logger.
func accessLogFrom(als []*accesslogv3.AccessLog) (*AccessLog, error) {
	switch {
	case len(als) == 0:
		return nil, nil
	case len(als) > 1:
		return nil, errors.New("exactly one access log is emulated")
	}
	std := &streamv3.StdoutAccessLog{}
	if als[0].GetName() != stdoutLoggerName || als[0].GetTypedConfig().UnmarshalTo(std) != nil {
		return nil, errors.New("only the stdout access logger (" + stdoutLoggerName + ") is emulated")
	}
	jf := std.GetLogFormat().GetJsonFormat()
	if jf == nil {
		return nil, errors.New("only a json_format log_format is emulated")
	}
	format := jf.AsMap()
	if err := checkLogFormat(format); err != nil {
		return nil, err
	}
	return &AccessLog{fields: compileLogFormat(format)}, nil
}

// logOperator matches one command operator: its name and argument (no truncation).
var logOperator = regexp.MustCompile(`^%([A-Z_]+)(?:\(([^()%]*)\))?%$`)

func checkLogFormat(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if err := checkLogFormat(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	case string:
		if !strings.Contains(x, "%") {
			return nil
		}
		m := logOperator.FindStringSubmatch(x)
		if m == nil {
			return fmt.Errorf("%q: only a value that is exactly one command operator is emulated", x)
		}
		name, arg := m[1], m[2]
		ok := false
		switch name {
		case "START_TIME", "RESPONSE_CODE", "DURATION":
			ok = arg == "" && !strings.Contains(x, "(")
		case "REQ":
			// No alternative header (a?b); truncation (:Z) is refused by logOperator.
			ok = arg != "" && !strings.Contains(arg, "?")
		case "DYNAMIC_METADATA":
			ok = arg != "" && !slices.Contains(strings.Split(arg, ":"), "")
		}
		if !ok {
			return fmt.Errorf("command operator %s not emulated", x)
		}
		return nil
	}
	return fmt.Errorf("%v: only strings and nested objects are emulated", v)
}

// logRecord is what a request's access log line is made of.
type logRecord struct {
	start  time.Time
	end    time.Time
	status int // 0: no response started
	req    headerList
	meta   map[string]*structpb.Struct
}

// applyDynamicMetadata takes a reply's dynamic_metadata as Envoy's ext_proc filter does
// (ext_proc.cc, Filter::setDynamicMetadata, called by Filter::onReceiveMessage for every
// reply kind, immediate responses included): only the namespaces listed in
// metadata_options.receiving_namespaces.untyped, each merged into the stream's
// (StreamInfoImpl::setDynamicMetadata, a protobuf MergeFrom: a key set again is
// replaced, a non-object value merges nothing).
func (x *exchange) applyDynamicMetadata(resp *extprocsvc.ProcessingResponse) {
	for ns, v := range resp.GetDynamicMetadata().GetFields() {
		if !slices.Contains(x.f.cfg.ExtProc.ReceivingNamespaces, ns) {
			continue
		}
		if x.meta == nil {
			x.meta = map[string]*structpb.Struct{}
		}
		dst := x.meta[ns]
		if dst == nil {
			dst = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			x.meta[ns] = dst
		}
		for k, fv := range v.GetStructValue().GetFields() {
			dst.Fields[k] = fv
		}
	}
}

// accessLogWriter serializes whole lines onto one writer.
type accessLogWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (a *accessLogWriter) write(b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.w.Write(b)
}

// logAccess writes the exchange's access log line, if the configuration has one.
func (x *exchange) logAccess() {
	al := x.f.cfg.AccessLog
	if al == nil || x.f.accessLog == nil {
		return
	}
	bp := lineBuffers.Get().(*[]byte)
	*bp = al.appendLine((*bp)[:0], &logRecord{start: x.start, end: time.Now(), status: x.status, req: x.reqH, meta: x.meta})
	x.f.accessLog.write(*bp)
	lineBuffers.Put(bp)
}
