package wire

// LspServerRequest names a server: a language and a project directory.
type LspServerRequest struct {
	LanguageID    string `json:"languageId"`
	PathToProject string `json:"pathToProject"`
}

// LspDocumentRequest names a document of a server.
type LspDocumentRequest struct {
	LspServerRequest
	URI string `json:"uri"`
}

// LspPosition is a zero-based line and character.
type LspPosition struct {
	Line      int `json:"line"`
	Character int `json:"character"`
}

// LspRange spans two positions.
type LspRange struct {
	Start LspPosition `json:"start"`
	End   LspPosition `json:"end"`
}

// LspLocation is a range of a document.
type LspLocation struct {
	URI   string   `json:"uri"`
	Range LspRange `json:"range"`
}

// LspSymbol is a symbol as the toolbox reports it, whichever of LSP's
// shapes the server answered with.
type LspSymbol struct {
	Kind     int         `json:"kind"`
	Name     string      `json:"name"`
	Location LspLocation `json:"location"`
}

// CompletionContext is LSP's completion trigger.
type CompletionContext struct {
	TriggerKind      int    `json:"triggerKind"`
	TriggerCharacter string `json:"triggerCharacter,omitempty"`
}

// LspCompletionParams is the body of POST /lsp/completions.
type LspCompletionParams struct {
	LspDocumentRequest
	Position *LspPosition       `json:"position"`
	Context  *CompletionContext `json:"context,omitempty"`
}

// CompletionItem is one completion. Documentation is always an object
// (LSP MarkupContent): a server's plain string is wrapped.
type CompletionItem struct {
	Label         string         `json:"label"`
	Kind          *int           `json:"kind,omitempty"`
	Detail        string         `json:"detail,omitempty"`
	Documentation map[string]any `json:"documentation,omitempty"`
	SortText      string         `json:"sortText,omitempty"`
	FilterText    string         `json:"filterText,omitempty"`
	InsertText    string         `json:"insertText,omitempty"`
}

// CompletionList answers POST /lsp/completions.
type CompletionList struct {
	IsIncomplete bool             `json:"isIncomplete"`
	Items        []CompletionItem `json:"items"`
}
