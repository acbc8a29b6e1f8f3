package translate

// Not written yet: the response half of the responses codec.

func (responsesCodec) decodeResponse(body []byte) (*Response, error) { return nil, errNotWritten }

func (responsesCodec) encodeResponse(r *Response, o ResponseOptions) ([]byte, error) {
	return nil, errNotWritten
}
