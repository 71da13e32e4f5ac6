package escape

// Outcome is what came of one attempt.
type Outcome string

const (
	// Blocked: the attempt failed and gained nothing.
	Blocked Outcome = "blocked"
	// Escaped: the attempt reached something outside its sandbox.
	Escaped Outcome = "escaped"
)

// Result is one line of the probe's output: one entry's attempt.
type Result struct {
	Entry     string  `json:"entry"`
	Attempted bool    `json:"attempted"`
	Outcome   Outcome `json:"outcome"`
	// Evidence says what was tried and what answered, briefly.
	Evidence string `json:"evidence"`
	// Read holds the token-like words of everything the attempt could
	// read, which the test searches for its secrets.
	Read []string `json:"read,omitempty"`
}
