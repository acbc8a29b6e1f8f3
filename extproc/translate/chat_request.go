package translate

// Not written yet: the request half of the chat codec.

func (chatCodec) decodeRequest(body []byte) (*Request, error) { return nil, errNotWritten }

func (chatCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	return nil, errNotWritten
}
