package translate

import "encoding/json"

// Request is a chat request in neutral form: what every chat API can say, and the
// few things only some can, each with the client param it came from so that an encoder
// that cannot honour it can refuse it by the client's name.
type Request struct {
	// Client is the API the client spoke: it names the client's fields when an upstream
	// refuses one (features.go).
	Client API
	// Model is the client's model id (replaced by RequestOptions.UpstreamModel).
	Model string
	// System is the system prompt: system/developer messages (chat), system (messages),
	// instructions and system/developer input items (responses), in order. Text only.
	System []string
	// Messages are the conversation turns, oldest first, without the system prompt.
	Messages []Message
	Tools    []Tool
	// ToolChoice is nil when the client gave none (the API's default applies).
	ToolChoice *ToolChoice
	// ParallelToolCalls is nil when the client gave none.
	ParallelToolCalls *bool
	// MaxOutput is the output token limit; 0 when the client gave none.
	MaxOutput int64
	// Stop are stop sequences; StopParam is the client's field for them.
	Stop      []string
	StopParam string
	// Temperature and TopP are nil when absent.
	Temperature *float64
	TopP        *float64
	// Stream: the client asked for a stream.
	Stream bool
	// IncludeUsage: the client asked for usage at the end of its stream (chat's
	// stream_options.include_usage; the other APIs always report it).
	IncludeUsage bool
	// User is the end user's id (chat/responses user, messages metadata.user_id).
	User string
	// ResponseFormat is nil when the client asked for plain text.
	ResponseFormat *ResponseFormat
}

// Role is who spoke a turn. Tool results travel in a user turn (as in Anthropic
// messages); encoders for APIs with a tool role split them out.
type Role uint8

const (
	RoleUser Role = iota + 1
	RoleAssistant
)

// Message is one turn.
type Message struct {
	Role  Role
	Parts []Part
}

// PartKind says which field of a Part is set.
type PartKind uint8

const (
	PartText PartKind = iota + 1
	PartImage
	PartToolCall
	PartToolResult
)

// Part is one piece of a turn or of an answer.
type Part struct {
	Kind       PartKind
	Text       string      // PartText
	Image      *Image      // PartImage
	ToolCall   *ToolCall   // PartToolCall (assistant turns, answers)
	ToolResult *ToolResult // PartToolResult (user turns)
}

// Image is an image input: by URL (http(s)) or by bytes (base64 Data with its
// MediaType). A data: URL from the client is decoded into MediaType and Data.
type Image struct {
	URL       string
	MediaType string
	Data      string // base64, as sent
	// Detail is OpenAI's detail hint ("low", "high", "auto"); empty when absent.
	Detail string
}

// ToolCall is a call of a client function tool.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON text of the arguments object, as the model wrote it.
	Arguments string
}

// ToolResult answers a ToolCall by its id.
type ToolResult struct {
	CallID string
	// Content is text and image parts.
	Content []Part
	IsError bool
}

// Tool is a client function tool.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments (an object schema); nil when absent.
	Parameters json.RawMessage
	// Strict is nil when absent.
	Strict *bool
}

// ToolChoiceMode is how the model may use tools.
type ToolChoiceMode uint8

const (
	ToolAuto ToolChoiceMode = iota + 1
	ToolNone
	ToolRequired // any tool
	ToolNamed    // the tool in Name
)

// ToolChoice is the client's tool_choice.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// ResponseFormatType is the kind of structured output asked for.
type ResponseFormatType uint8

const (
	FormatJSONObject ResponseFormatType = iota + 1
	FormatJSONSchema
)

// ResponseFormat asks for JSON output.
type ResponseFormat struct {
	Type   ResponseFormatType
	Name   string
	Schema json.RawMessage
	Strict *bool
	// Param is the client's field (response_format, text.format), for a refusal.
	Param string
}

// Response is a complete (non-streamed) answer in neutral form.
type Response struct {
	// ID is the upstream's response id, kept so logs can be matched to the provider's.
	ID string
	// Created is the upstream's creation time in Unix seconds; 0 when it gave none.
	Created int64
	// Content is text and tool call parts, in the order the model produced them.
	Content []Part
	Finish  Finish
	// StopSequence is the stop sequence that ended the answer (FinishStopSequence).
	StopSequence string
	Usage        Usage
}

// Finish is why an answer ended.
type Finish uint8

const (
	FinishUnknown Finish = iota
	// FinishStop: the model ended its turn (chat "stop", messages "end_turn",
	// responses "completed").
	FinishStop
	// FinishLength: the output limit was reached (chat "length", messages "max_tokens",
	// responses "incomplete"/max_output_tokens).
	FinishLength
	// FinishToolCalls: the model called tools (chat "tool_calls", messages "tool_use").
	FinishToolCalls
	// FinishStopSequence: a stop sequence matched (chat "stop", messages
	// "stop_sequence" with stop_sequence set).
	FinishStopSequence
	// FinishContentFilter: the provider withheld content (chat "content_filter",
	// messages "refusal", responses "incomplete"/content_filter).
	FinishContentFilter
)

// Usage is what the provider billed. Input counts every input token, cache reads and
// writes included; Output counts every output token, reasoning included.
type Usage struct {
	Input  int64 // every input token, the parts below included
	Output int64 // every output token, reasoning and audio included
	// CacheRead, CacheWrite (the default, 5-minute window), CacheWrite1h and AudioIn
	// are parts of Input; Reasoning and AudioOut parts of Output.
	CacheRead    int64
	CacheWrite   int64
	CacheWrite1h int64
	AudioIn      int64
	Reasoning    int64
	AudioOut     int64
}

// turn is one turn of an API whose roles must alternate: "user" or "assistant", and its
// blocks in that API's shape.
type turn[B any] struct {
	role   string
	blocks []B
}

// alternatingTurns converts each message's parts with out and merges consecutive turns of
// one role, as the APIs that want the roles to alternate (Messages, Converse) need: a chat
// conversation's tool messages and the user message after them become one user turn. A
// message with no blocks is left out.
func alternatingTurns[B any](msgs []Message, out func([]Part) ([]B, error)) ([]turn[B], error) {
	var turns []turn[B]
	for _, m := range msgs {
		role := "user"
		if m.Role == RoleAssistant {
			role = "assistant"
		}
		blocks, err := out(m.Parts)
		if err != nil {
			return nil, err
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			continue
		}
		turns = append(turns, turn[B]{role, blocks})
	}
	return turns, nil
}
