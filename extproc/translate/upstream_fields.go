package translate

import "fmt"

// upstreamTable is what one upstream API does with each feature a client's request can
// ask for (features.go). Every feature has an entry; a test keeps it so.
type upstreamTable [numFeatures]field

// upstreamFields is the one home of what each upstream API maps, drops or refuses: a
// translated request passes admit before its upstream's encoder, which writes only what
// is left, so the table is the behaviour and the docs' tables are it, rendered. The
// client APIs' are here, an upstream-only API's in its upstreamOnly entry.
func upstreamFields(api API) *upstreamTable {
	switch api {
	case Chat:
		return &chatUpstream
	case Responses:
		return &responsesUpstream
	case Messages:
		return &messagesUpstream
	}
	return upstreamOnly[api].fields
}

var chatUpstream = upstreamTable{
	fSystem:            {Mapped, "system messages, first"},
	fTurns:             {Mapped, "user and assistant messages"},
	fImageBytes:        {Mapped, "image_url with a data: URL"},
	fImageURL:          {Mapped, "image_url"},
	fImageType:         {Mapped, "sent as given"},
	fImageDetail:       {Mapped, "image_url.detail"},
	fToolCalls:         {Mapped, "assistant tool_calls; tool messages"},
	fToolResultImage:   {Refused, "its tool results carry text only"},
	fTools:             {Mapped, "function tools"},
	fToolStrict:        {Mapped, "function.strict"},
	fToolChoice:        {Mapped, "auto, required, a named function"},
	fToolChoiceNone:    {Mapped, "none"},
	fParallelToolCalls: {Mapped, "parallel_tool_calls"},
	fMaxOutput:         {Mapped, "max_completion_tokens"},
	fStop:              {Mapped, "stop"},
	fTemperature:       {Mapped, "temperature"},
	fTemperatureAbove1: {Mapped, "temperature (0 to 2)"},
	fTopP:              {Mapped, "top_p"},
	fUser:              {Mapped, "user"},
	fJSONObject:        {Mapped, "response_format"},
	fJSONSchema:        {Mapped, "response_format.json_schema"},
	fJSONSchemaOptions: {Mapped, "json_schema.name and strict"},
}

var responsesUpstream = upstreamTable{
	fSystem:            {Mapped, "instructions (several joined by a blank line)"},
	fTurns:             {Mapped, "input messages"},
	fImageBytes:        {Mapped, "input_image with a data: URL"},
	fImageURL:          {Mapped, "input_image"},
	fImageType:         {Mapped, "sent as given"},
	fImageDetail:       {Mapped, "detail (auto when absent)"},
	fToolCalls:         {Mapped, "function_call and function_call_output items"},
	fToolResultImage:   {Refused, "its tool results carry text only"},
	fTools:             {Mapped, "function tools"},
	fToolStrict:        {Mapped, "strict"},
	fToolChoice:        {Mapped, "auto, required, a named function"},
	fToolChoiceNone:    {Mapped, "none"},
	fParallelToolCalls: {Mapped, "parallel_tool_calls"},
	fMaxOutput:         {Mapped, "max_output_tokens"},
	fStop:              {Refused, "it takes no stop sequences"},
	fTemperature:       {Mapped, "temperature"},
	fTemperatureAbove1: {Mapped, "temperature (0 to 2)"},
	fTopP:              {Mapped, "top_p"},
	fUser:              {Mapped, "user"},
	fJSONObject:        {Mapped, "text.format"},
	fJSONSchema:        {Mapped, "text.format"},
	fJSONSchemaOptions: {Mapped, "text.format's name and strict"},
}

// messagesUpstream serves Anthropic and Claude on Vertex AI alike (one body builder).
var messagesUpstream = upstreamTable{
	fSystem:            {Mapped, "system (several joined by a blank line)"},
	fTurns:             {Mapped, "user and assistant turns, consecutive turns of one role merged"},
	fImageBytes:        {Mapped, "image block, base64 source"},
	fImageURL:          {Mapped, "image block, url source"},
	fImageType:         {Mapped, "sent as given"},
	fImageDetail:       {Dropped, "a sizing hint with no counterpart"},
	fToolCalls:         {Mapped, "tool_use and tool_result blocks"},
	fToolResultImage:   {Mapped, "image blocks in the tool_result"},
	fTools:             {Mapped, "tools with input_schema"},
	fToolStrict:        {Dropped, "no counterpart; the schema is sent"},
	fToolChoice:        {Mapped, "auto, any, tool (left out when no tools are given)"},
	fToolChoiceNone:    {Mapped, "none"},
	fParallelToolCalls: {Mapped, "tool_choice.disable_parallel_tool_use"},
	fMaxOutput:         {Mapped, "max_tokens (the model's maximum when absent)"},
	fStop:              {Mapped, "stop_sequences"},
	fTemperature:       {Mapped, "temperature"},
	fTemperatureAbove1: {Refused, "it takes a temperature between 0 and 1"},
	fTopP:              {Mapped, "top_p"},
	fUser:              {Mapped, "metadata.user_id"},
	fJSONObject:        {Refused, "it has no structured output format"},
	fJSONSchema:        {Refused, "it has no structured output format"},
	fJSONSchemaOptions: {Refused, "it has no structured output format"},
}

// geminiUpstream serves the Gemini API and Gemini on Vertex AI (one generateContent body).
var geminiUpstream = upstreamTable{
	fSystem:            {Mapped, "systemInstruction"},
	fTurns:             {Mapped, "contents (assistant → model)"},
	fImageBytes:        {Mapped, "inlineData"},
	fImageURL:          {Refused, "it takes images by their bytes only; send the image's bytes"},
	fImageType:         {Mapped, "inlineData.mimeType, as given"},
	fImageDetail:       {Dropped, "a sizing hint with no counterpart"},
	fToolCalls:         {Mapped, "functionCall and functionResponse parts, matched by name"},
	fToolResultImage:   {Refused, "its tool results carry text only"},
	fTools:             {Mapped, "functionDeclarations with parametersJsonSchema"},
	fToolStrict:        {Dropped, "no counterpart; the schema is sent"},
	fToolChoice:        {Mapped, "toolConfig.functionCallingConfig: AUTO, ANY, ANY with allowedFunctionNames"},
	fToolChoiceNone:    {Mapped, "functionCallingConfig NONE"},
	fParallelToolCalls: {Dropped, "no counterpart; the model may call several tools in one answer"},
	fMaxOutput:         {Mapped, "generationConfig.maxOutputTokens"},
	fStop:              {Mapped, "generationConfig.stopSequences"},
	fTemperature:       {Mapped, "generationConfig.temperature"},
	fTemperatureAbove1: {Mapped, "generationConfig.temperature (0 to 2)"},
	fTopP:              {Mapped, "generationConfig.topP"},
	fUser:              {Dropped, "no counterpart"},
	fJSONObject:        {Mapped, "generationConfig.responseMimeType application/json"},
	fJSONSchema:        {Mapped, "generationConfig.responseJsonSchema"},
	fJSONSchemaOptions: {Dropped, "no counterpart; the schema itself is sent"},
}

var bedrockUpstream = upstreamTable{
	fSystem:            {Mapped, "system blocks"},
	fTurns:             {Mapped, "messages, consecutive turns of one role merged"},
	fImageBytes:        {Mapped, "image blocks, format from the media type"},
	fImageURL:          {Refused, "it takes images by their bytes only; send the image's bytes"},
	fImageType:         {Refused, "it takes PNG, JPEG, GIF and WebP images only"},
	fImageDetail:       {Dropped, "a sizing hint with no counterpart"},
	fToolCalls:         {Mapped, "toolUse and toolResult blocks"},
	fToolResultImage:   {Mapped, "image blocks in the toolResult"},
	fTools:             {Mapped, "toolConfig.tools[].toolSpec"},
	fToolStrict:        {Dropped, "no counterpart; the schema is sent"},
	fToolChoice:        {Mapped, "toolConfig.toolChoice: auto, any, tool (left out when no tools are given)"},
	fToolChoiceNone:    {Refused, "it cannot be told not to call the tools it is given"},
	fParallelToolCalls: {Dropped, "no counterpart; the model may call several tools in one answer"},
	fMaxOutput:         {Mapped, "inferenceConfig.maxTokens (the model's maximum when absent)"},
	fStop:              {Mapped, "inferenceConfig.stopSequences"},
	fTemperature:       {Mapped, "inferenceConfig.temperature"},
	fTemperatureAbove1: {Mapped, "inferenceConfig.temperature (the model's own range applies)"},
	fTopP:              {Mapped, "inferenceConfig.topP"},
	fUser:              {Dropped, "no counterpart"},
	fJSONObject:        {Refused, "it has no structured output format"},
	fJSONSchema:        {Refused, "it has no structured output format"},
	fJSONSchemaOptions: {Refused, "it has no structured output format"},
}

// admit applies upstream's table to r, in place: the first feature it refuses is an
// *Unsupported naming the client's field; the features it drops are taken out of r.
func admit(upstream API, r *Request) error {
	t := upstreamFields(upstream)
	if t == nil {
		return nil
	}
	for id := range numFeatures {
		e := t[id]
		if e.fate == Mapped {
			continue
		}
		f := &features[id]
		found, ok := f.find(r)
		if !ok {
			continue
		}
		if e.fate == Refused {
			return unsupported(f.param(r, found), "%s", refusal(f, e))
		}
		f.drop(r)
	}
	return nil
}

// refusal is the message refusing feature f by table entry e.
func refusal(f *feature, e field) string {
	return fmt.Sprintf("This model's upstream API cannot take the %s: %s.", f.name, e.note)
}
