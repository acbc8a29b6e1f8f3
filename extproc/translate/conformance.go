package translate

import (
	"maps"
	"slices"
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

// upstreamDoc is an upstream table with its section's title (the channels it serves are
// in docs/providers.md).
type upstreamDoc struct {
	title string
	table *upstreamTable
}

// upstreamDocs are the upstream tables in the docs' order: the client APIs', then the
// upstream-only APIs' that have a title, in the order of their constants.
var upstreamDocs = func() []upstreamDoc {
	docs := []upstreamDoc{
		{"OpenAI Chat Completions", &chatUpstream},
		{"OpenAI Responses", &responsesUpstream},
		{"Anthropic Messages (Anthropic, Claude on Vertex AI)", &messagesUpstream},
	}
	apis := slices.Sorted(maps.Keys(upstreamOnly))
	for _, api := range apis {
		if u := upstreamOnly[api]; u.title != "" {
			docs = append(docs, upstreamDoc{u.title, u.fields})
		}
	}
	return docs
}()

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
