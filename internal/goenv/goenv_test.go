package goenv

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	cases := []struct {
		name      string
		in, want  []string
		isApplied bool
	}{
		{name: "unset", in: []string{"PATH=/bin"},
			want: []string{"PATH=/bin", "GOMAXPROCS=1", "GODEBUG=" + NoDeepSleep}},
		{name: "caller's GOMAXPROCS", in: []string{"GOMAXPROCS=3"},
			want: []string{"GOMAXPROCS=3", "GODEBUG=" + NoDeepSleep}},
		{name: "other GODEBUG settings kept", in: []string{"GODEBUG=http2client=0,gctrace=1", "GOMAXPROCS=2"},
			want: []string{"GODEBUG=http2client=0,gctrace=1," + NoDeepSleep, "GOMAXPROCS=2"}},
		{name: "empty GODEBUG", in: []string{"GODEBUG="},
			want: []string{"GODEBUG=" + NoDeepSleep, "GOMAXPROCS=1"}},
		{name: "caller's schedtrace", in: []string{"GODEBUG=gctrace=1,schedtrace=0"},
			want: []string{"GODEBUG=gctrace=1,schedtrace=0", "GOMAXPROCS=1"}},
		{name: "caller's both", in: []string{"GODEBUG=schedtrace=0", "GOMAXPROCS=2"},
			want: []string{"GODEBUG=schedtrace=0", "GOMAXPROCS=2"}, isApplied: true},
		{name: "a longer name is not schedtrace", in: []string{"GODEBUG=xschedtrace=1"},
			want: []string{"GODEBUG=xschedtrace=1," + NoDeepSleep, "GOMAXPROCS=1"}},
		{name: "each variable once", in: []string{"GODEBUG=a=1", "GOMAXPROCS=2", "GODEBUG=b=1", "GOMAXPROCS=4"},
			want: []string{"GODEBUG=a=1," + NoDeepSleep, "GOMAXPROCS=2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Apply(tc.in)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Apply(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if a := Applied(tc.in); a != tc.isApplied {
				t.Errorf("Applied(%q) = %v, want %v", tc.in, a, tc.isApplied)
			}
			if !Applied(got) {
				t.Errorf("Applied(Apply(%q)) is false", tc.in)
			}
			if again := Apply(got); !slices.Equal(again, got) {
				t.Errorf("Apply is not idempotent: %q then %q", got, again)
			}
		})
	}
}

// TestNoDeepSleepPeriod: the runtime parses a GODEBUG value into an int32 and ignores one
// that does not fit; a period of zero or less would leave the deep sleep on.
func TestNoDeepSleepPeriod(t *testing.T) {
	v, ok := strings.CutPrefix(NoDeepSleep, "schedtrace=")
	if !ok {
		t.Fatalf("NoDeepSleep = %q, not a schedtrace setting", NoDeepSleep)
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n != math.MaxInt32 {
		t.Errorf("period %q: %v, want the largest int32", v, err)
	}
}
