package translate

// Not written yet: the request half of the messages codec.

func (messagesCodec) decodeRequest(body []byte) (*Request, error) { return nil, errNotWritten }

func (messagesCodec) encodeRequest(r *Request, o RequestOptions) ([]byte, error) {
	return nil, errNotWritten
}
