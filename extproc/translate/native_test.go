package translate

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
)

// nativeStream is an upstream-only API's recorded stream: Gemini's as the provider
// sent it; Bedrock's event stream encoded from its recorded events with the AWS SDK's
// encoder (the framing is binary, its CRCs computed).
func nativeStream(t *testing.T, api API) []byte {
	t.Helper()
	if api == Gemini {
		return readNative(t, "gemini.sse")
	}
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	sc := bufio.NewScanner(bytes.NewReader(readNative(t, "bedrock.events")))
	for sc.Scan() {
		name, payload, _ := strings.Cut(sc.Text(), " ")
		m := eventstream.Message{Payload: []byte(payload)}
		m.Headers.Set(":event-type", eventstream.StringValue(name))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		if err := enc.Encode(&out, m); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func readNative(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/native/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bedrockIDs are the ids the gateway gives Bedrock answers, random each time.
var bedrockIDs = regexp.MustCompile(`msg_bdrk_[0-9a-f]{24}`)

// sameID is a copy of b with Bedrock answer ids replaced by one, for comparison.
func sameID(b []byte) []byte { return bedrockIDs.ReplaceAll(bytes.Clone(b), []byte("msg_bdrk_ID")) }

var natives = []API{Gemini, Bedrock}

// TestNativeAnswersEveryClient: a recorded Gemini and Bedrock answer, normalized and
// translated, keeps its meaning on every client API: text, the tool call, the finish
// reason and the usage (Gemini's thoughts billed as output beside its candidates,
// its cached tokens inside the prompt; Bedrock's cache reads beside its input).
func TestNativeAnswersEveryClient(t *testing.T) {
	o := ResponseOptions{PublicModel: "public-model", Created: 42}
	for _, up := range natives {
		norm, err := NewNormalizer(up, false, o).Write(readNative(t, up.String()+".json"), true)
		if err != nil {
			t.Fatalf("%v: %v", up, err)
		}
		for _, client := range apis {
			tr, ok := New(client, up)
			if !ok {
				t.Fatalf("%v→%v: no translator", up, client)
			}
			out, err := tr.Response(norm, o)
			if err != nil {
				t.Fatalf("%v→%v: %v", up, client, err)
			}
			got, err := codecs[client].decodeResponse(out)
			if err != nil {
				t.Fatalf("%v→%v: %v\n%s", up, client, err, out)
			}
			checkAnswer(t, up.String()+"→"+client.String(), got)
			if !bytes.Contains(out, []byte(`"public-model"`)) {
				t.Errorf("%v→%v: the public model id is missing\n%s", up, client, out)
			}
		}
	}
}

// TestNativeStreamsEverySplit: a recorded Gemini stream and Bedrock event stream,
// fed cut at every byte, normalize into the same Messages events, and those keep the
// answer's meaning on every client API.
func TestNativeStreamsEverySplit(t *testing.T) {
	o := ResponseOptions{PublicModel: "public-model", Created: 42, IncludeUsage: true}
	for _, up := range natives {
		in := nativeStream(t, up)
		whole, err := NewNormalizer(up, true, o).Write(in, true)
		if err != nil {
			t.Fatalf("%v: %v", up, err)
		}
		whole = sameID(whole)
		for split := 1; split < len(in); split++ {
			n := NewNormalizer(up, true, o)
			a, err := n.Write(in[:split], false)
			out := bytes.Clone(a)
			if err == nil {
				var b []byte
				b, err = n.Write(in[split:], true)
				out = append(out, b...)
			}
			if out = sameID(out); err != nil || !bytes.Equal(out, whole) {
				t.Fatalf("%v split at %d: %v\n%s\nwant\n%s", up, split, err, out, whole)
			}
		}
		for _, client := range apis {
			tr, _ := New(client, up)
			out, err := tr.Stream(o).Write(whole, true)
			if err != nil {
				t.Fatalf("%v→%v: %v", up, client, err)
			}
			if client == Messages {
				out = whole
			}
			got, done := collect(t, client, bytes.Clone(out))
			if !done {
				t.Errorf("%v→%v: the client's stream has no end", up, client)
			}
			checkAnswer(t, up.String()+"→"+client.String()+" stream", got)
		}
	}
}

// TestEventStreamRefusesDamage: a flipped byte fails the event stream's CRC, and a
// stream cut inside a message has no end: both are malformed answers, never events.
func TestEventStreamRefusesDamage(t *testing.T) {
	in := nativeStream(t, Bedrock)
	bad := bytes.Clone(in)
	bad[20] ^= 0xff
	if _, err := NewNormalizer(Bedrock, true, ResponseOptions{}).Write(bad, true); err == nil {
		t.Error("a damaged message was decoded")
	}
	if _, err := NewNormalizer(Bedrock, true, ResponseOptions{}).Write(in[:len(in)-3], true); err == nil {
		t.Error("a stream cut inside a message was accepted")
	}
}

// cloudRequest is a chat request with everything a codec maps: a system prompt, a
// multi-turn history with an image, a tool call and its result, tools, stop
// sequences and an output limit.
const cloudRequest = `{"model":"m","max_tokens":50,"stop":["END"],"temperature":0.5,
"messages":[{"role":"system","content":"Be brief."},
{"role":"user","content":[{"type":"text","text":"What colour?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"text\":\"red\"}"}}]},
{"role":"tool","tool_call_id":"call_1","content":"crimson"}],
"tools":[{"type":"function","function":{"name":"lookup","description":"Look up","parameters":{"type":"object","properties":{"text":{"type":"string"}}}}}],
"tool_choice":"required"}`

func TestGeminiRequest(t *testing.T) {
	tr, _ := New(Chat, Gemini)
	out, err := tr.Request([]byte(cloudRequest), RequestOptions{UpstreamModel: "gemini-2.5-flash", MaxOutput: 8192})
	if err != nil {
		t.Fatal(err)
	}
	g := gjson.ParseBytes(out)
	for path, want := range map[string]string{
		"systemInstruction.parts.0.text":                           "Be brief.",
		"contents.0.role":                                          "user",
		"contents.0.parts.0.text":                                  "What colour?",
		"contents.0.parts.1.inlineData.mimeType":                   "image/png",
		"contents.0.parts.1.inlineData.data":                       "iVBORw0KGgo=",
		"contents.1.role":                                          "model",
		"contents.1.parts.0.text":                                  "Let me look.",
		"contents.1.parts.1.functionCall.name":                     "lookup",
		"contents.1.parts.1.functionCall.args.text":                "red",
		"contents.2.role":                                          "user",
		"contents.2.parts.0.functionResponse.name":                 "lookup",
		"contents.2.parts.0.functionResponse.response.output":      "crimson",
		"tools.0.functionDeclarations.0.name":                      "lookup",
		"tools.0.functionDeclarations.0.parametersJsonSchema.type": "object",
		"toolConfig.functionCallingConfig.mode":                    "ANY",
		"generationConfig.maxOutputTokens":                         "50",
		"generationConfig.stopSequences.0":                         "END",
		"generationConfig.temperature":                             "0.5",
	} {
		if got := g.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q\n%s", path, got, want, out)
		}
	}
	for _, absent := range []string{"model", "stream", "contents.1.parts.1.functionCall.id"} {
		if g.Get(absent).Exists() {
			t.Errorf("%s is sent\n%s", absent, out)
		}
	}
}

func TestBedrockRequest(t *testing.T) {
	tr, _ := New(Chat, Bedrock)
	out, err := tr.Request([]byte(cloudRequest), RequestOptions{UpstreamModel: "anthropic.claude-x", MaxOutput: 8192})
	if err != nil {
		t.Fatal(err)
	}
	g := gjson.ParseBytes(out)
	for path, want := range map[string]string{
		"system.0.text":                                     "Be brief.",
		"messages.0.role":                                   "user",
		"messages.0.content.0.text":                         "What colour?",
		"messages.0.content.1.image.format":                 "png",
		"messages.0.content.1.image.source.bytes":           "iVBORw0KGgo=",
		"messages.1.role":                                   "assistant",
		"messages.1.content.1.toolUse.toolUseId":            "call_1",
		"messages.1.content.1.toolUse.input.text":           "red",
		"messages.2.content.0.toolResult.toolUseId":         "call_1",
		"messages.2.content.0.toolResult.content.0.text":    "crimson",
		"toolConfig.tools.0.toolSpec.name":                  "lookup",
		"toolConfig.tools.0.toolSpec.inputSchema.json.type": "object",
		"toolConfig.toolChoice.any":                         "{}",
		"inferenceConfig.maxTokens":                         "50",
		"inferenceConfig.stopSequences.0":                   "END",
	} {
		if got := g.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q\n%s", path, got, want, out)
		}
	}
	if g.Get("model").Exists() || g.Get("stream").Exists() {
		t.Errorf("model or stream is sent in the body\n%s", out)
	}
	// Converse takes no image URL and cannot forbid the tools it is given.
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
	} {
		if _, err := tr.Request([]byte(body), RequestOptions{}); err == nil {
			t.Errorf("accepted %s", body)
		}
	}
}

func TestVertexMessagesRequest(t *testing.T) {
	for _, client := range apis {
		tr, ok := New(client, VertexMessages)
		if !ok {
			t.Fatalf("%v: no translator", client)
		}
		body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stream":true}`
		if client == Responses {
			body = `{"model":"m","max_output_tokens":10,"input":"hi","stream":true}`
		}
		out, err := tr.Request([]byte(body), RequestOptions{UpstreamModel: "claude-x@2025"})
		if err != nil {
			t.Fatal(err)
		}
		g := gjson.ParseBytes(out)
		if g.Get("model").Exists() || g.Get("anthropic_version").Str != "vertex-2023-10-16" || !g.Get("stream").Bool() {
			t.Errorf("%v: %s", client, out)
		}
	}
}
