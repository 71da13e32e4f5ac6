package client

import "context"

// ExecWithBuiltins is Exec with the input codec of a sandbox without head
// or base64, for the tests to cover both.
func (c *Client) ExecWithBuiltins(ctx context.Context, command string, s Streams) (int, error) {
	return c.exec(ctx, command, s, &textInput)
}
