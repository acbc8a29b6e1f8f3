package translate

// The vertex-messages codec: Anthropic Messages on Vertex AI. The body names no model
// (the path does) and carries the Vertex API version; the answer is a Messages answer.

// vertexAnthropicVersion is the anthropic_version Vertex AI requires in the body.
const vertexAnthropicVersion = "vertex-2023-10-16"

func (vertexMessagesCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	b, err := messagesBodyOf(r, o)
	if err != nil {
		return nil, err
	}
	b.Model, b.AnthropicVersion = "", vertexAnthropicVersion
	return marshal(b)
}
