package video

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/wire"
)

func TestAdmit(t *testing.T) {
	m := &catalog.Model{ID: "v", Kind: catalog.KindVideo, Video: &catalog.Video{MinDurationSeconds: 3, MaxDurationSeconds: 15, DefaultDurationSeconds: 6, Resolution: "720p"}}
	noDefault := &catalog.Model{ID: "w", Kind: catalog.KindVideo, Video: &catalog.Video{MinDurationSeconds: 4, MaxDurationSeconds: 15, Resolution: "1080p"}}
	tests := []struct {
		name string
		m    *catalog.Model
		v    wire.Video
		want int64
		code apierr.Code
	}{
		{name: "given", m: m, v: wire.Video{Duration: 15}, want: 15},
		{name: "default", m: m, v: wire.Video{}, want: 6},
		{name: "minimum when no default", m: noDefault, v: wire.Video{}, want: 4},
		{name: "below range", m: m, v: wire.Video{Duration: 2}, code: apierr.InvalidDuration},
		{name: "not whole", m: m, v: wire.Video{Duration: -1}, code: apierr.InvalidDuration},
		{name: "tier field case-insensitive", m: m, v: wire.Video{Resolution: "720P"}, want: 6},
		{name: "other tier field", m: m, v: wire.Video{Resolution: "480p"}, code: apierr.ResolutionNotPriced},
		{name: "own tier in prompt", m: noDefault, v: wire.Video{Prompt: "a city at night, 1080p"}, want: 4},
		{name: "other tier in prompt", m: noDefault, v: wire.Video{Prompt: "a city at night in 720p"}, code: apierr.ResolutionNotPriced},
		{name: "number in a word is no tier", m: m, v: wire.Video{Prompt: "a 1080px banner"}, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, e := Admit(&tt.v, tt.m)
			if tt.code != "" {
				if e == nil || e.Code != tt.code {
					t.Fatalf("got %d, %v; want %s", d, e, tt.code)
				}
				if tt.code == apierr.InvalidDuration && !strings.Contains(e.Message, "from 3 to 15") {
					t.Fatalf("message %q does not name the range", e.Message)
				}
				return
			}
			if e != nil || d != tt.want {
				t.Fatalf("got %d, %v; want %d", d, e, tt.want)
			}
		})
	}
}

func TestValidTaskID(t *testing.T) {
	for id, ok := range map[string]bool{
		"vid_1": true, "a.b-c_d:e": true, strings.Repeat("x", 200): true,
		"": false, strings.Repeat("x", 201): false, "a/b": false, "a b": false, "é": false, "a%2F": false,
	} {
		if ValidTaskID(id) != ok {
			t.Errorf("ValidTaskID(%q) = %v", id, !ok)
		}
	}
}
