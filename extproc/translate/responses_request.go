package translate

// Not written yet: the request half of the responses codec.

func (responsesCodec) decodeRequest(body []byte) (*Request, error) { return nil, errNotWritten }

func (responsesCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	return nil, errNotWritten
}
