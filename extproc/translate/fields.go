package translate

import (
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
)

// Fate is what a translated request does with a client field.
type Fate uint8

const (
	// Mapped: carried to the upstream's API (in its own shape).
	Mapped Fate = iota + 1
	// Dropped: not sent; losing it changes nothing the client can observe in the
	// answer's meaning.
	Dropped
	// Refused: the request is refused (400 invalid_request naming the field), because
	// its meaning would be lost.
	Refused
)

func (f Fate) String() string {
	switch f {
	case Mapped:
		return "mapped"
	case Dropped:
		return "dropped"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// field is one top-level request field of a client API and its fate when translated.
type field struct {
	fate Fate
	note string
}

// requestFields are the top-level request fields of each client API, from the API
// references, and what happens to them when the request is translated to another API.
// A field not listed is refused (unknown: its meaning cannot be known). Some mapped
// fields are refused by a particular upstream encoder when that API cannot honour them
// (the note says which).
var requestFields = map[API]map[string]field{
	Chat: {
		"model":                 {Mapped, "the channel's upstream model id"},
		"messages":              {Mapped, "system/developer → system prompt; user, assistant (text, tool_calls), tool → turns; text and image parts"},
		"max_tokens":            {Mapped, "output limit"},
		"max_completion_tokens": {Mapped, "output limit (the larger of the two)"},
		"stop":                  {Mapped, "stop sequences (refused toward Responses, which has none)"},
		"temperature":           {Mapped, "toward Messages only 0–1 (above: refused)"},
		"top_p":                 {Mapped, "sampling"},
		"stream":                {Mapped, "stream"},
		"stream_options":        {Mapped, "include_usage: usage at the end of the client's stream"},
		"tools":                 {Mapped, "function tools (other types refused)"},
		"tool_choice":           {Mapped, "auto, none, required, a named function"},
		"parallel_tool_calls":   {Mapped, "Messages: tool_choice.disable_parallel_tool_use; Responses: parallel_tool_calls"},
		"user":                  {Mapped, "Messages: metadata.user_id; Responses: user"},
		"response_format":       {Mapped, "Responses: text.format; toward Messages json_object/json_schema refused"},
		"n":                     {Refused, "only n = 1 is served (validated before)"},
		"seed":                  {Dropped, "best-effort determinism hint"},
		"store":                 {Dropped, "the gateway is stateless"},
		"metadata":              {Dropped, "OpenAI dashboard tags"},
		"service_tier":          {Dropped, "the channel's own tier applies"},
		"logprobs":              {Refused, "no counterpart"},
		"top_logprobs":          {Refused, "no counterpart"},
		"logit_bias":            {Refused, "no counterpart"},
		"frequency_penalty":     {Refused, "no counterpart"},
		"presence_penalty":      {Refused, "no counterpart"},
		"functions":             {Refused, "legacy: use tools"},
		"function_call":         {Refused, "legacy: use tool_choice"},
		"prediction":            {Refused, "no counterpart"},
		"modalities":            {Refused, "no counterpart"},
		"audio":                 {Refused, "no counterpart"},
		"reasoning_effort":      {Refused, "no counterpart"},
		"web_search_options":    {Refused, "server-side tool (refused as unpriced before)"},
		"verbosity":             {Refused, "no counterpart"},
		"prompt_cache_key":      {Dropped, "a cache routing hint"},
		"safety_identifier":     {Dropped, "an abuse-monitoring id"},
	},
	Messages: {
		"model":          {Mapped, "the channel's upstream model id"},
		"messages":       {Mapped, "user/assistant turns: text, image, tool_use, tool_result blocks"},
		"system":         {Mapped, "system prompt (string or text blocks)"},
		"max_tokens":     {Mapped, "output limit"},
		"stop_sequences": {Mapped, "stop sequences (refused toward Responses, which has none)"},
		"temperature":    {Mapped, "sampling"},
		"top_p":          {Mapped, "sampling"},
		"top_k":          {Refused, "no counterpart"},
		"stream":         {Mapped, "stream"},
		"tools":          {Mapped, "custom (client) tools; server tools refused"},
		"tool_choice":    {Mapped, "auto, any, tool, none; disable_parallel_tool_use → parallel_tool_calls false"},
		"metadata":       {Mapped, "user_id → user"},
		"thinking":       {Refused, "no counterpart"},
		"service_tier":   {Dropped, "the channel's own tier applies"},
		"container":      {Refused, "server-side execution"},
		"mcp_servers":    {Refused, "server-side tools"},
	},
	Responses: {
		"model":                {Mapped, "the channel's upstream model id"},
		"input":                {Mapped, "string or items: messages (text, images), function_call, function_call_output"},
		"instructions":         {Mapped, "system prompt"},
		"max_output_tokens":    {Mapped, "output limit"},
		"temperature":          {Mapped, "toward Messages only 0–1 (above: refused)"},
		"top_p":                {Mapped, "sampling"},
		"stream":               {Mapped, "stream"},
		"tools":                {Mapped, "function tools (other types refused)"},
		"tool_choice":          {Mapped, "auto, none, required, a named function"},
		"parallel_tool_calls":  {Mapped, "Messages: tool_choice.disable_parallel_tool_use; Chat: parallel_tool_calls"},
		"user":                 {Mapped, "Chat: user; Messages: metadata.user_id"},
		"text":                 {Mapped, "text.format → Chat response_format; toward Messages json formats refused"},
		"store":                {Dropped, "the gateway is stateless"},
		"metadata":             {Dropped, "OpenAI dashboard tags"},
		"service_tier":         {Dropped, "the channel's own tier applies"},
		"truncation":           {Refused, "\"auto\" has no counterpart; \"disabled\", every other API's behaviour, passes"},
		"stream_options":       {Dropped, "obfuscation padding"},
		"prompt_cache_key":     {Dropped, "a cache routing hint"},
		"safety_identifier":    {Dropped, "an abuse-monitoring id"},
		"include":              {Refused, "no counterpart"},
		"previous_response_id": {Refused, "stateless gateway"},
		"conversation":         {Refused, "stateless gateway"},
		"reasoning":            {Refused, "no counterpart"},
		"background":           {Refused, "no counterpart"},
		"prompt":               {Refused, "stored prompts"},
		"top_logprobs":         {Refused, "no counterpart"},
		"max_tool_calls":       {Refused, "no counterpart"},
	},
}

// checkFields refuses a translated request's top-level fields whose fate is Refused or
// that the table does not know. A null value counts as absent.
func checkFields(api API, root wire.Object) error {
	var err error
	table := requestFields[api]
	root.Each(func(name, _ string, v gjson.Result) bool {
		if v.Type == gjson.Null {
			return true
		}
		f, ok := table[name]
		switch {
		case !ok:
			err = unsupported(name, "The field '%s' cannot be translated for this model's upstream API.", name)
		case f.fate == Refused:
			if name == "n" && v.Type == gjson.Number && v.Num == 1 {
				return true
			}
			if name == "truncation" && v.Str == "disabled" {
				return true
			}
			err = unsupported(name, "The field '%s' has no counterpart in this model's upstream API (%s).", name, f.note)
		}
		return err == nil
	})
	return err
}
