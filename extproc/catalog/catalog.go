// Package catalog is the gateway's model catalog: the public models (id, endpoint kind,
// published prices, limits), the upstream channels that serve them (Envoy cluster,
// wire format, upstream model id, credential, priority, weight, tiers) and the upstream
// clusters the channels route to (served to Envoy over xDS by extproc/xds).
//
// It is loaded from one YAML file at start (strict: unknown fields are errors) and
// validated as a whole, reporting every problem at once. A loaded Catalog is immutable
// and safe for concurrent use. Credentials are resolved at load time and never appear in
// String output or errors.
//
// Prices are integers in micro-credits per million units (tokens, characters), or per
// unit (image, second). A price may be absent: such a model is listed but refused with
// pricing_unavailable, since no complete published price exists.
//
// It depends on the wire package (model id rule), the credential package (which builds
// each channel's signer from its resolved secrets), the translate package's format table
// (the formats a channel may name, each with its credential style and path shape) and
// sigs.k8s.io/yaml only.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/translate"
	"github.com/llmgw/gateway/extproc/wire"
	"sigs.k8s.io/yaml"
)

// Kind is an endpoint kind: which API a model is called through.
type Kind string

const (
	KindChat       Kind = "chat"
	KindMessages   Kind = "messages"
	KindResponses  Kind = "responses"
	KindEmbeddings Kind = "embeddings"
	KindSpeech     Kind = "speech"
	KindImage      Kind = "image"
	KindVideo      Kind = "video"
)

// Format is an upstream wire format: the name of a row of the format table
// (translate.Formats), which says what it speaks, where and with which credential.
type Format string

// spec is f's row of the format table.
func (f Format) spec() (*translate.Format, bool) { return translate.FormatNamed(string(f)) }

// kindFormats are the upstream formats a model of each kind may be served in: a chat
// model (chat, messages, responses) by every format that speaks a chat API (the gateway
// translates between them, extproc/translate), another kind by the formats whose row
// lists it.
var kindFormats = func() map[Kind][]Format {
	m := map[Kind][]Format{}
	for _, name := range translate.Formats() {
		f, _ := translate.FormatNamed(name)
		if f.API != 0 {
			for _, k := range []Kind{KindChat, KindMessages, KindResponses} {
				m[k] = append(m[k], Format(name))
			}
		}
		for _, k := range f.Other {
			m[Kind(k)] = append(m[Kind(k)], Format(name))
		}
	}
	return m
}()

// Prices are a model's published prices in micro-credits. A nil field is unpublished.
type Prices struct {
	// Rates are the token prices (chat, messages, responses; embeddings use
	// InputPerMTok only): the base of the rate card, which the overrides below refine.
	Rates
	// LongContext, ServiceTiers and InferenceGeo override the base rates (pricing
	// applies them in the order base → long-context band → service tier → region).
	LongContext  *LongContext     `json:"long_context,omitempty"`
	ServiceTiers map[string]Rates `json:"service_tiers,omitempty"`
	InferenceGeo map[string]Rates `json:"inference_geo,omitempty"`
	// PerMillionChars is per million input characters (speech).
	PerMillionChars *int64 `json:"per_million_chars,omitempty"`
	// PerImage is per generated image.
	PerImage *int64 `json:"per_image,omitempty"`
	// PerSecond is per second of generated video.
	PerSecond *int64 `json:"per_second,omitempty"`
}

// Video holds a video model's accepted durations and its priced resolution tier.
type Video struct {
	MinDurationSeconds     int    `json:"min_duration_seconds"`
	MaxDurationSeconds     int    `json:"max_duration_seconds"`
	DefaultDurationSeconds int    `json:"default_duration_seconds,omitempty"`
	Resolution             string `json:"resolution"`
}

// Model is a public model.
type Model struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Free models cost nothing and are callable without a top-up; they carry no prices.
	Free   bool   `json:"free,omitempty"`
	Prices Prices `json:"prices,omitempty"`
	// MaxOutputTokens is the model's published output limit (token kinds).
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// HighCost requests also hold a slot in the account's smaller high-cost pool.
	HighCost bool `json:"high_cost,omitempty"`
	// OwnedBy and Created fill the /v1/models entry.
	OwnedBy string `json:"owned_by,omitempty"`
	Created int64  `json:"created,omitempty"`
	// Voices lists the voices a speech model supports.
	Voices []string `json:"voices,omitempty"`
	Video  *Video   `json:"video,omitempty"`

	channels []*Channel // sorted by priority, then name
}

// Channel is one upstream route for a model.
type Channel struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	// Cluster is the Envoy cluster the request is routed to.
	Cluster       string `json:"cluster"`
	Format        Format `json:"format"`
	UpstreamModel string `json:"upstream_model"`
	// BasePath replaces the format's default path prefix ("/v1" for openai and
	// anthropic, "/v1beta" for gemini, "/v1/projects/{project}/locations/{location}"
	// of gcp for the vertex formats): "/openai/v1" for Azure OpenAI or Groq, "/api/v1"
	// for OpenRouter. Empty: the default.
	BasePath string `json:"base_path,omitempty"`
	// The upstream credential (credential.go): a key read from CredentialEnv or
	// CredentialFile (exactly one), sent in CredentialHeader (default by format); or AWS
	// (format bedrock); or GCP (formats vertex-*).
	CredentialEnv    string         `json:"credential_env,omitempty"`
	CredentialFile   string         `json:"credential_file,omitempty"`
	CredentialHeader string         `json:"credential_header,omitempty"`
	AWS              *AWSCredential `json:"aws,omitempty"`
	GCP              *GCPCredential `json:"gcp,omitempty"`
	// Priority: lower values are tried first. Weight splits traffic among channels of
	// equal priority (default 1).
	Priority int  `json:"priority,omitempty"`
	Weight   *int `json:"weight,omitempty"`
	// Tiers the channel is open to; empty means every tier.
	Tiers []string `json:"tiers,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// MultimodalEmbeddings marks an embeddings channel that also serves
	// /v1/embeddings/multimodal.
	MultimodalEmbeddings bool `json:"multimodal_embeddings,omitempty"`

	credential credential.Credential
}

// Credential authenticates requests to the channel's upstream.
func (c *Channel) Credential() credential.Credential { return c.credential }

// IsEnabled reports whether the channel takes traffic.
func (c *Channel) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// EffectiveWeight is the channel's weight, 1 when unset.
func (c *Channel) EffectiveWeight() int {
	if c.Weight == nil {
		return 1
	}
	return *c.Weight
}

// OpenTo reports whether the channel serves accounts of tier.
func (c *Channel) OpenTo(tier string) bool {
	return len(c.Tiers) == 0 || slices.Contains(c.Tiers, tier)
}

// String describes the channel without its credential.
func (c *Channel) String() string {
	return fmt.Sprintf("channel %s (%s → %s/%s)", c.Name, c.Model, c.Cluster, c.UpstreamModel)
}

// Channels returns the model's channels, by priority then name. Do not modify.
func (m *Model) Channels() []*Channel { return m.channels }

// Candidates returns the model's enabled channels open to tier, by priority.
func (m *Model) Candidates(tier string) []*Channel {
	var out []*Channel
	for _, c := range m.channels {
		if c.IsEnabled() && c.OpenTo(tier) {
			out = append(out, c)
		}
	}
	return out
}

// HasCandidate reports whether any enabled channel is open to tier, without allocating.
func (m *Model) HasCandidate(tier string) bool {
	for _, c := range m.channels {
		if c.IsEnabled() && c.OpenTo(tier) {
			return true
		}
	}
	return false
}

// PriceComplete reports whether every price the model's kind is billed by is published.
// Free models are always complete.
func (m *Model) PriceComplete() bool {
	if m.Free {
		return true
	}
	p := m.Prices
	switch m.Kind {
	case KindChat, KindMessages, KindResponses:
		return p.InputPerMTok != nil && p.OutputPerMTok != nil
	case KindEmbeddings:
		return p.InputPerMTok != nil
	case KindSpeech:
		return p.PerMillionChars != nil
	case KindImage:
		return p.PerImage != nil
	case KindVideo:
		return p.PerSecond != nil
	}
	return false
}

// Catalog is a validated set of models and channels. Safe for concurrent use.
type Catalog struct {
	models   []*Model
	byID     map[string]*Model
	clusters []*Cluster
}

// Clusters returns the upstream clusters, in file order. Do not modify.
func (c *Catalog) Clusters() []*Cluster { return c.clusters }

// Cluster returns the cluster named name, nil when there is none.
func (c *Catalog) Cluster(name string) *Cluster {
	for _, cl := range c.clusters {
		if cl.Name == name {
			return cl
		}
	}
	return nil
}

// Model returns the model with the public id.
func (c *Catalog) Model(id string) (*Model, bool) {
	m, ok := c.byID[id]
	return m, ok
}

// Models returns every model, in file order. Do not modify.
func (c *Catalog) Models() []*Model { return c.models }

// file is the YAML document.
type file struct {
	// Models are decoded one by one (decodeModel), so that an unknown field is reported
	// with the model it is in.
	Models   []json.RawMessage `json:"models"`
	Channels []*Channel        `json:"channels"`
	Clusters []*Cluster        `json:"clusters"`
}

// Load reads and validates the catalog file at path, resolving credentials from the
// process environment and the file system.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return Parse(data, os.LookupEnv, os.ReadFile)
}

// Parse decodes and validates a catalog document. lookupEnv and readFile resolve the
// channels' credentials (os.LookupEnv and os.ReadFile in production). Every problem is
// reported, joined with errors.Join.
func Parse(data []byte, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (*Catalog, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("catalog: "+format, args...)) }

	c := &Catalog{byID: make(map[string]*Model, len(f.Models))}
	for i, raw := range f.Models {
		m, err := decodeModel(raw)
		if m == nil {
			bad("models[%d]: empty entry", i)
			continue
		}
		where := fmt.Sprintf("models[%d] (%s)", i, m.ID)
		if err != nil {
			bad("%s: %v", where, err)
			continue
		}
		validateModel(m, where, bad)
		if m.ID != "" {
			if _, dup := c.byID[m.ID]; dup {
				bad("%s: duplicate model id", where)
				continue
			}
			c.byID[m.ID] = m
		}
		if m.OwnedBy == "" {
			m.OwnedBy = "llmgw"
		}
		c.models = append(c.models, m)
	}

	clusters := map[string]bool{}
	for i, cl := range f.Clusters {
		if cl == nil {
			bad("clusters[%d]: empty entry", i)
			continue
		}
		where := fmt.Sprintf("clusters[%d] (%s)", i, cl.Name)
		cl.validate(where, bad)
		if clusters[cl.Name] {
			bad("%s: duplicate cluster name", where)
		}
		clusters[cl.Name] = true
		c.clusters = append(c.clusters, cl)
	}

	names := map[string]bool{}
	for i, ch := range f.Channels {
		if ch == nil {
			bad("channels[%d]: empty entry", i)
			continue
		}
		where := fmt.Sprintf("channels[%d] (%s)", i, ch.Name)
		if ch.Name == "" {
			bad("%s: name is required", where)
		} else if names[ch.Name] {
			bad("%s: duplicate channel name", where)
		}
		names[ch.Name] = true
		m, ok := c.byID[ch.Model]
		if !ok {
			bad("%s: model %q is not in the catalog", where, ch.Model)
		}
		if ch.Cluster == "" {
			bad("%s: cluster is required", where)
		} else if !clusters[ch.Cluster] {
			bad("%s: cluster %q is not in the catalog's clusters", where, ch.Cluster)
		}
		if ch.UpstreamModel == "" {
			bad("%s: upstream_model is required", where)
		}
		if _, known := ch.Format.spec(); !known {
			bad("%s: format %q is not one of %s", where, ch.Format, strings.Join(translate.Formats(), ", "))
		} else if ok && len(kindFormats[m.Kind]) > 0 && !slices.Contains(kindFormats[m.Kind], ch.Format) {
			fs := kindFormats[m.Kind]
			bad("%s: format %q cannot serve a %s model (needs one of %q)", where, ch.Format, m.Kind, fs)
		}
		if msg := basePathProblem(ch.Format, ch.BasePath); msg != "" {
			bad("%s: %s", where, msg)
		}
		if ch.MultimodalEmbeddings && ok && m.Kind != KindEmbeddings {
			bad("%s: multimodal_embeddings applies to embeddings models only", where)
		}
		if ch.Priority < 0 {
			bad("%s: priority must be >= 0", where)
		}
		if ch.Weight != nil && *ch.Weight < 1 {
			bad("%s: weight must be >= 1", where)
		}
		for _, t := range ch.Tiers {
			if strings.TrimSpace(t) == "" {
				bad("%s: empty tier name", where)
			}
		}
		ch.resolveCredential(secretSource{lookupEnv, readFile, where, bad})
		if ok {
			m.channels = append(m.channels, ch)
		}
	}
	for _, m := range c.models {
		slices.SortStableFunc(m.channels, func(a, b *Channel) int {
			if a.Priority != b.Priority {
				return a.Priority - b.Priority
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// decodeModel decodes one model entry strictly (unknown fields are errors). The model
// comes back with what could be read of it (its id, for the error) even when the entry
// is refused; nil for an empty entry.
func decodeModel(raw json.RawMessage) (*Model, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	m := &Model{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &id)
		return &Model{ID: id.ID}, err
	}
	return m, nil
}

func validateModel(m *Model, where string, bad func(string, ...any)) {
	if !wire.ValidModelID(m.ID) {
		bad("%s: id must be 1 to 256 characters without whitespace", where)
	}
	p := m.Prices
	units := []namedPrice{{"per_million_chars", p.PerMillionChars}, {"per_image", p.PerImage}, {"per_second", p.PerSecond}}
	for _, pr := range units {
		if pr.v != nil && *pr.v < 0 {
			bad("%s: prices.%s must be >= 0", where, pr.name)
		}
	}
	for _, pr := range append(p.fields(), units...) {
		if pr.v != nil && m.Free {
			bad("%s: a free model carries no prices (prices.%s is set)", where, pr.name)
		}
	}
	if m.MaxOutputTokens < 0 {
		bad("%s: max_output_tokens must be > 0", where)
	}
	validateRateCard(&m.Prices, where, bad)
	if p.rateCardSet() && !slices.Contains([]Kind{KindChat, KindMessages, KindResponses}, m.Kind) {
		bad("%s: cache, audio, image, long-context, tier and region prices apply to chat models only", where)
	}
	// used lists the prices a kind is billed by; any other price is a mistake.
	var used []string
	switch m.Kind {
	case KindChat, KindMessages, KindResponses:
		used = []string{"input_per_mtok", "output_per_mtok"}
		if m.MaxOutputTokens == 0 {
			bad("%s: max_output_tokens is required for a %s model", where, m.Kind)
		}
	case KindEmbeddings:
		used = []string{"input_per_mtok"}
	case KindSpeech:
		used = []string{"per_million_chars"}
		if len(m.Voices) == 0 {
			bad("%s: a speech model needs at least one voice", where)
		}
	case KindImage:
		used = []string{"per_image"}
	case KindVideo:
		used = []string{"per_second"}
		switch v := m.Video; {
		case v == nil:
			bad("%s: a video model needs a video section", where)
		case v.MinDurationSeconds < 1 || v.MaxDurationSeconds < v.MinDurationSeconds:
			bad("%s: video durations must satisfy 1 <= min_duration_seconds <= max_duration_seconds", where)
		case v.DefaultDurationSeconds != 0 && (v.DefaultDurationSeconds < v.MinDurationSeconds || v.DefaultDurationSeconds > v.MaxDurationSeconds):
			bad("%s: video default_duration_seconds is outside the accepted range", where)
		}
		if m.Video != nil && m.Video.Resolution == "" {
			bad("%s: video resolution tier is required", where)
		}
	default:
		bad("%s: kind %q is not one of chat, messages, responses, embeddings, speech, image, video", where, m.Kind)
		return
	}
	if m.Kind != KindVideo && m.Video != nil {
		bad("%s: only video models have a video section", where)
	}
	if m.Kind != KindSpeech && len(m.Voices) > 0 {
		bad("%s: only speech models have voices", where)
	}
	for _, pr := range []struct {
		name  string
		isSet bool
	}{
		{"input_per_mtok", p.InputPerMTok != nil}, {"output_per_mtok", p.OutputPerMTok != nil},
		{"per_million_chars", p.PerMillionChars != nil}, {"per_image", p.PerImage != nil}, {"per_second", p.PerSecond != nil},
	} {
		if pr.isSet && !slices.Contains(used, pr.name) {
			bad("%s: prices.%s does not apply to a %s model", where, pr.name, m.Kind)
		}
	}
}
