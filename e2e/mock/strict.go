package mock

import (
	"fmt"
	"sort"
	"strings"
)

// Strictness like the real APIs (docs/local-stack.md): what a real provider refuses with a
// 400 the mock refuses too, in its own shape, so a gateway that translates badly fails the
// e2e suite instead of passing silently.

// knownFields are the documented top-level request fields of each real API.
var knownFields = map[string]map[string]bool{
	"/v1/chat/completions": set("model", "messages", "audio", "frequency_penalty", "function_call", "functions",
		"logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
		"parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_retention",
		"reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop", "store",
		"stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
		"verbosity", "web_search_options"),
	"/v1/responses": set("model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
		"stream_options", "tools", "tool_choice", "parallel_tool_calls", "user", "text", "store", "metadata",
		"service_tier", "truncation", "include", "previous_response_id", "conversation", "reasoning", "background",
		"prompt", "top_logprobs", "max_tool_calls", "prompt_cache_key", "prompt_cache_retention", "safety_identifier"),
	"/v1/messages": set("model", "messages", "max_tokens", "system", "stop_sequences", "temperature", "top_p",
		"top_k", "stream", "tools", "tool_choice", "metadata", "thinking", "service_tier", "container",
		"mcp_servers", "context_management", "inference_geo"),
	"/v1/messages/count_tokens": set("model", "messages", "system", "tools", "tool_choice", "thinking",
		"mcp_servers", "context_management"),
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// strictError is the message of the 400 the real API would answer, "" when it would
// accept the body.
func strictError(path string, body map[string]any) string {
	path = strings.TrimPrefix(path, "/openai") // Azure OpenAI's v1 API
	known, ok := knownFields[path]
	if !ok {
		return ""
	}
	var unknown []string
	for k := range body {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if strings.HasPrefix(path, "/v1/messages") {
			return unknown[0] + ": Extra inputs are not permitted"
		}
		return "Unrecognized request argument supplied: " + strings.Join(unknown, ", ")
	}
	switch path {
	case "/v1/chat/completions":
		return strictChat(body)
	case "/v1/responses":
		return strictResponses(body)
	}
	return strictMessages(body)
}

func strictChat(body map[string]any) string {
	calls := map[string]bool{}
	msgs, _ := body["messages"].([]any)
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		switch mm["role"] {
		case "assistant":
			tcs, _ := mm["tool_calls"].([]any)
			for _, tc := range tcs {
				if t, _ := tc.(map[string]any); t != nil {
					id, _ := t["id"].(string)
					calls[id] = true
				}
			}
		case "tool":
			if id, _ := mm["tool_call_id"].(string); !calls[id] {
				return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
			}
		case "user":
			parts, _ := mm["content"].([]any)
			for j, p := range parts {
				pm, _ := p.(map[string]any)
				if pm["type"] != "image_url" {
					continue
				}
				u, _ := pm["image_url"].(map[string]any)
				url, _ := u["url"].(string)
				if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "data:image/") {
					return fmt.Sprintf("Invalid image URL: 'messages[%d].content[%d].image_url.url'. Expected a valid URL or a base64 data URL.", i, j)
				}
			}
		}
	}
	return ""
}

func strictResponses(body map[string]any) string {
	calls := map[string]bool{}
	items, _ := body["input"].([]any)
	for _, it := range items {
		im, _ := it.(map[string]any)
		switch im["type"] {
		case "function_call":
			id, _ := im["call_id"].(string)
			calls[id] = true
		case "function_call_output":
			if id, _ := im["call_id"].(string); !calls[id] {
				return "No tool call found for function call output with call_id " + id + "."
			}
		}
	}
	return ""
}

func strictMessages(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	var prevUses map[string]bool
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		if role != "user" && role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		uses := map[string]bool{}
		blocks, _ := mm["content"].([]any)
		for j, b := range blocks {
			bm, _ := b.(map[string]any)
			switch bm["type"] {
			case "tool_use":
				id, _ := bm["id"].(string)
				uses[id] = true
			case "tool_result":
				if id, _ := bm["tool_use_id"].(string); role != "user" || !prevUses[id] {
					return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
				}
			case "image":
				src, _ := bm["source"].(map[string]any)
				switch src["type"] {
				case "base64":
					if mt, _ := src["media_type"].(string); mt == "" || src["data"] == nil {
						return fmt.Sprintf("messages.%d.content.%d.image.source.base64: media_type and data are required", i, j)
					}
				case "url":
					if u, _ := src["url"].(string); u == "" {
						return fmt.Sprintf("messages.%d.content.%d.image.source.url.url: Field required", i, j)
					}
				default:
					return fmt.Sprintf("messages.%d.content.%d.image.source: Input tag does not match any of the expected tags: 'base64', 'url'", i, j)
				}
			}
		}
		prevUses = uses
	}
	return ""
}
