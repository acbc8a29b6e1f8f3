package translate

import (
	"sort"
	"strings"
)

// ConformanceTable renders requestFields as docs/translation.md's Markdown table.
func ConformanceTable() string {
	var b strings.Builder
	b.WriteString("| client API | field | when translated |\n|---|---|---|\n")
	for _, api := range []API{Chat, Messages, Responses} {
		names := make([]string, 0, len(requestFields[api]))
		for n := range requestFields[api] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			f := requestFields[api][n]
			b.WriteString("| " + api.String() + " | `" + n + "` | " + f.fate.String() + ": " + f.note + " |\n")
		}
	}
	return b.String()
}

// upstreamDocs are the upstream tables in the docs' order, each with its section's
// title (the channels it serves are in docs/providers.md).
var upstreamDocs = []struct {
	title string
	table *upstreamTable
}{
	{"OpenAI Chat Completions", &chatUpstream},
	{"OpenAI Responses", &responsesUpstream},
	{"Anthropic Messages (Anthropic, Claude on Vertex AI)", &messagesUpstream},
	{"Gemini generateContent (Gemini API, Vertex AI)", &geminiUpstream},
	{"Amazon Bedrock Converse", &bedrockUpstream},
}

// UpstreamTables renders upstreamFields as docs/translation.md's section of one
// Markdown table per upstream API: what each feature of a client's request becomes
// toward it, and from which client field.
func UpstreamTables() string {
	var b strings.Builder
	for i, d := range upstreamDocs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("### Toward " + d.title + "\n\n")
		b.WriteString("| request asks for | chat | messages | responses | toward this API |\n|---|---|---|---|---|\n")
		for id := range numFeatures {
			f, e := &features[id], d.table[id]
			b.WriteString("| " + f.name)
			for _, api := range []API{Chat, Messages, Responses} {
				p := "—"
				if f.params[api] != "" {
					p = "`" + strings.ReplaceAll(f.params[api], ", ", "`, `") + "`"
				}
				b.WriteString(" | " + p)
			}
			b.WriteString(" | " + e.fate.String() + ": " + e.note + " |\n")
		}
	}
	return b.String()
}
