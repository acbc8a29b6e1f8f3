package translate

// EventKind says what a stream Event reports.
type EventKind uint8

const (
	// EventStart opens the answer: ID, Created (and Usage.Input when the upstream says
	// it up front, as Anthropic's message_start does).
	EventStart EventKind = iota + 1
	// EventText is a text delta of the content part Index.
	EventText
	// EventToolCall opens tool call part Index with ToolCall.ID and ToolCall.Name.
	EventToolCall
	// EventToolArgs is an arguments delta (ToolCall.Arguments) of tool call part Index.
	EventToolArgs
	// EventPartDone closes part Index.
	EventPartDone
	// EventFinish says why the answer ended (Finish, StopSequence).
	EventFinish
	// EventUsage reports usage; a later EventUsage supersedes an earlier one field by
	// field (only non-zero fields are set).
	EventUsage
	// EventError is an error the upstream reported inside the stream (ErrorType,
	// Message: the provider's words, which encoders do not forward verbatim).
	EventError
	// EventDone ends the stream normally.
	EventDone
)

// Event is one neutral stream event. Index numbers the answer's content parts from 0 in
// the order they were opened, whatever the upstream's own numbering.
type Event struct {
	Kind         EventKind
	Index        int
	ID           string
	Created      int64
	Text         string
	ToolCall     ToolCall
	Finish       Finish
	StopSequence string
	Usage        Usage
	ErrorType    string
	Message      string
}
