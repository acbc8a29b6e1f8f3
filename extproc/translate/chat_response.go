package translate

// Not written yet: the response half of the chat codec.

func (chatCodec) decodeResponse(body []byte) (*Response, error) { return nil, errNotWritten }

func (chatCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	return nil, errNotWritten
}
