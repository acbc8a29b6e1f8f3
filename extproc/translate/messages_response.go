package translate

// Not written yet: the response half of the messages codec.

func (messagesCodec) decodeResponse(body []byte) (*Response, error) { return nil, errNotWritten }

func (messagesCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	return nil, errNotWritten
}
