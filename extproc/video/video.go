// Package video holds the video wire format's request rules: the submission body
// (POST /v1/video/generations), the task id of GET /v1/videos/{taskId}, and the model
// rules a submission is checked against once its model is known (duration range and
// default, the published resolution tier, which may also be named in the prompt).
//
// Like the other wire-format packages it reads the client's bytes with gjson and
// returns *apierr.Error values with the spec's codes; it never re-marshals a body. The
// webhook URL's syntax is checked here; its destination (own hosts, DNS) by the
// lifecycle through extproc/webhook. It depends on apierr, wire, catalog and webhook.
package video

import (
	"crypto/rand"
	"regexp"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// MaxTaskIDLen is the longest task id.
const MaxTaskIDLen = 200

// ValidTaskID reports whether id is 1 to 200 characters from letters, digits, '.', '-',
// '_' and ':'.
func ValidTaskID(id string) bool {
	if id == "" || len(id) > MaxTaskIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}

// TaskIDPrefix starts every task id the gateway issues.
const TaskIDPrefix = "vtask_"

// NewTaskID returns a fresh gateway task id: the prefix and 26 random base-32 characters
// (130 bits), inside the spec's id rules. It names one task whatever ids the providers
// hand out (they may repeat across channels, or after a provider restarts).
func NewTaskID() string {
	return TaskIDPrefix + strings.ToLower(rand.Text())
}

// ParseSubmit validates a video submission body. duration must be a whole number of
// seconds (a JSON integer literal); whether it is inside the model's range is checked by
// Admit. A duration that is not a whole number is kept as -1 so that Admit can answer
// invalid_duration naming the model's range.
func ParseSubmit(body []byte) (wire.Parsed, *apierr.Error) {
	root, p, err := wire.Begin(body)
	if err != nil {
		return p, err
	}
	v := &wire.Video{}
	p.Video = v
	if v.Prompt, err = wire.OptionalString(root, "prompt"); err != nil {
		return p, err
	}
	if d := root.Get("duration"); d.Exists() && d.Type != gjson.Null {
		v.Duration = -1
		if d.Type == gjson.Number && wire.IsIntegerLiteral(d.Raw) {
			if n, err := strconv.ParseInt(d.Raw, 10, 64); err == nil && n > 0 {
				v.Duration = n
			}
		}
	}
	// resolution is not wire.RequiredText: it is optional, but when given must be non-empty.
	if r := root.Get("resolution"); r.Exists() && r.Type != gjson.Null {
		if r.Type != gjson.String || r.Str == "" {
			return p, apierr.Param(apierr.InvalidRequest, "resolution", "The 'resolution' field must be a non-empty string.")
		}
		v.Resolution = r.Str
	}
	// webhook_url is not wire.OptionalString: the spec answers invalid_webhook_url for it.
	if w := root.Get("webhook_url"); w.Exists() && w.Type != gjson.Null {
		if w.Type != gjson.String {
			return p, apierr.Param(apierr.InvalidWebhookURL, "webhook_url", "The 'webhook_url' field must be a string.")
		}
		if _, e := webhook.CheckSyntax(w.Str); e != nil {
			return p, e
		}
		v.WebhookURL = w.Str
	}
	if err := wire.NoStream(root, "Video generation"); err != nil {
		return p, err
	}
	return p, nil
}

// tierRE finds resolution tiers named in a prompt: 480p, 720p, 1080p, 4k, …
var tierRE = regexp.MustCompile(`(?i)\b(\d{3,4}p|[248]k)\b`)

// Admit applies the model's video rules to a parsed submission and returns the billed
// duration in seconds: the request's, else the model's default (else its minimum). A
// duration outside the range is invalid_duration naming the range; a resolution (field
// or tier named in the prompt) other than the model's published tier is
// resolution_not_priced.
func Admit(v *wire.Video, m *catalog.Model) (int64, *apierr.Error) {
	mv := m.Video
	if mv == nil {
		return 0, apierr.New(apierr.InternalError, "The model has no video rules.")
	}
	lo, hi := int64(mv.MinDurationSeconds), int64(mv.MaxDurationSeconds)
	d := v.Duration
	if d == 0 {
		d = int64(mv.DefaultDurationSeconds)
		if d == 0 {
			d = lo
		}
	}
	if d < lo || d > hi {
		return 0, apierr.Param(apierr.InvalidDuration, "duration",
			"The 'duration' field must be a whole number of seconds from "+strconv.FormatInt(lo, 10)+" to "+strconv.FormatInt(hi, 10)+" for the model '"+m.ID+"'.")
	}
	notPriced := func(asked, where string) *apierr.Error {
		return apierr.Param(apierr.ResolutionNotPriced, "resolution",
			"The model '"+m.ID+"' is published for the "+mv.Resolution+" tier only, and "+where+" asked for "+asked+
				"; omit the resolution, name the tier in the prompt, or use the model published for the tier you want.")
	}
	if v.Resolution != "" && !strings.EqualFold(v.Resolution, mv.Resolution) {
		return 0, notPriced(strconv.Quote(v.Resolution), "the request")
	}
	for _, t := range tierRE.FindAllString(v.Prompt, -1) {
		if !strings.EqualFold(t, mv.Resolution) {
			return 0, notPriced(strconv.Quote(t), "the prompt")
		}
	}
	return d, nil
}
