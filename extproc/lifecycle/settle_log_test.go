package lifecycle

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The settled record's units are one JSON object, keys in order, also when there are
// none.
func TestSettledUnitsLogAsObject(t *testing.T) {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg"})
	for _, tc := range []struct {
		units map[string]int64
		want  string
	}{
		{nil, `{"msg":"settled","units":{}}` + "\n"},
		{map[string]int64{"seconds": 8, "characters": 120, "images": 2}, `{"msg":"settled","units":{"characters":120,"images":2,"seconds":8}}` + "\n"},
	} {
		buf, err := enc.EncodeEntry(zapcore.Entry{Message: "settled"}, []zap.Field{zap.Object("units", unitsField(tc.units))})
		if err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != tc.want {
			t.Errorf("got %s want %s", got, tc.want)
		}
	}
}
