package mock

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// ---- embeddings ----

const defaultDimensions = 16

// embeddingInputs splits an embeddings input into items: each item's text (for the
// vector) and its token count (words, or the length of a token array).
func embeddingInputs(in any) (texts []string, tokens int, ok bool) {
	switch v := in.(type) {
	case string:
		return []string{v}, len(strings.Fields(v)), true
	case []any:
		if len(v) == 0 {
			return nil, 0, false
		}
		if _, isNum := v[0].(float64); isNum {
			return []string{fmt.Sprint(v)}, len(v), true
		}
		for _, e := range v {
			switch x := e.(type) {
			case string:
				texts = append(texts, x)
				tokens += len(strings.Fields(x))
			case []any:
				texts = append(texts, fmt.Sprint(x))
				tokens += len(x)
			default:
				return nil, 0, false
			}
		}
		return texts, tokens, true
	}
	return nil, 0, false
}

// vector is a deterministic unit-ish vector derived from text.
func vector(text string, dims int) []float32 {
	out := make([]float32, dims)
	var block [32]byte
	for i := 0; i < dims; i++ {
		if i%8 == 0 {
			block = sha256.Sum256([]byte(fmt.Sprintf("%s#%d", text, i/8)))
		}
		u := binary.LittleEndian.Uint32(block[(i%8)*4:])
		out[i] = float32(u)/float32(math.MaxUint32)*2 - 1
	}
	return out
}

func (s *Server) embeddings(w http.ResponseWriter, q *request) {
	texts, tokens, ok := embeddingInputs(q.body["input"])
	if !ok {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "'input' is required and must be a string, an array of strings, or token arrays.")
		return
	}
	dims := intField(q.body, "dimensions")
	if dims == 0 {
		dims = defaultDimensions
	}
	format, _ := q.body["encoding_format"].(string)
	data := make([]map[string]any, 0, len(texts))
	for i, t := range texts {
		vec := vector(t, dims)
		var emb any = vec
		if format == "base64" {
			b := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": q.model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// ---- speech ----

// speechFormats maps response_format to content type and the bytes real files of that
// format start with.
var speechFormats = map[string]struct {
	contentType string
	magic       []byte
}{
	"mp3":  {"audio/mpeg", []byte("ID3\x04\x00\x00")},
	"opus": {"audio/ogg", []byte("OggS\x00")},
	"aac":  {"audio/aac", []byte{0xFF, 0xF1}},
	"flac": {"audio/flac", []byte("fLaC")},
	"wav":  {"audio/wav", []byte("RIFF\x00\x00\x00\x00WAVEfmt ")},
	"pcm":  {"application/octet-stream", nil},
}

func (s *Server) speech(w http.ResponseWriter, q *request) {
	input, _ := q.body["input"].(string)
	voice, _ := q.body["voice"].(string)
	if input == "" || voice == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "'input' and 'voice' are required.")
		return
	}
	format, _ := q.body["response_format"].(string)
	if format == "" {
		format = "mp3"
	}
	f, ok := speechFormats[format]
	if !ok {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("Invalid response_format %q.", format))
		return
	}
	// 64 bytes of "audio" per input character, derived from the text and voice.
	audio := append([]byte{}, f.magic...)
	seed := sha256.Sum256([]byte(voice + "\x00" + input))
	for len(audio) < len(f.magic)+64*len([]rune(input)) {
		seed = sha256.Sum256(seed[:])
		audio = append(audio, seed[:]...)
	}
	w.Header().Set("Content-Type", f.contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(audio)
}

// ---- images ----

// onePixelPNG is a valid 1x1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func (s *Server) images(w http.ResponseWriter, q *request) {
	prompt, _ := q.body["prompt"].(string)
	if prompt == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "'prompt' is required.")
		return
	}
	d := parseDirectives(prompt)
	if !sleep(q.r.Context(), secs(d.slow)) {
		return
	}
	item := map[string]any{"revised_prompt": strings.TrimSpace(directiveRE.ReplaceAllString(prompt, ""))}
	if rf, _ := q.body["response_format"].(string); rf == "b64_json" {
		item["b64_json"] = onePixelPNG
	} else {
		item["url"] = "https://images.mock.invalid/" + idFor("img-", q.raw) + ".png"
	}
	writeJSON(w, http.StatusOK, map[string]any{"created": s.now().Unix(), "data": []any{item}})
}

// ---- video tasks ----

type videoTask struct {
	id, model, key string
	duration       int
	resolution     string
	created        time.Time
	// ready is when the task completes (the prompt's slow directive, default 1 s).
	ready time.Time
}

func (s *Server) videoSubmit(w http.ResponseWriter, q *request) {
	prompt, _ := q.body["prompt"].(string)
	dur := intField(q.body, "duration")
	if dur == 0 {
		dur = 5
	}
	res, _ := q.body["resolution"].(string)
	if res == "" {
		res = "720p"
	}
	d := parseDirectives(prompt)
	wait := time.Second
	if d.slow > 0 {
		wait = secs(d.slow)
	}
	now := s.now()
	s.mu.Lock()
	s.seq++
	t := &videoTask{
		id:    fmt.Sprintf("%s-%d", idFor("vid_mock", q.raw), s.seq),
		model: q.model, key: q.key, duration: dur, resolution: res, created: now, ready: now.Add(wait),
	}
	s.videos[t.id] = t
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.videoJSON(t, now))
}

func (s *Server) videoJSON(t *videoTask, now time.Time) map[string]any {
	status := "in_progress"
	v := map[string]any{
		"id": t.id, "object": "video.generation", "model": t.model, "created_at": t.created.Unix(),
		"duration": t.duration, "resolution": t.resolution,
	}
	if !now.Before(t.ready) {
		status = "completed"
		v["completed_at"] = t.ready.Unix()
		v["url"] = "https://videos.mock.invalid/" + t.id + ".mp4"
	} else if now.Equal(t.created) {
		status = "queued"
	}
	v["status"] = status
	return v
}

func (s *Server) videoGet(w http.ResponseWriter, q *request) {
	id := q.r.PathValue("id")
	s.mu.Lock()
	t := s.videos[id]
	s.mu.Unlock()
	if t == nil || t.key != q.key {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("No video task with id %q.", id))
		return
	}
	writeJSON(w, http.StatusOK, s.videoJSON(t, s.now()))
}
