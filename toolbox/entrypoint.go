package toolbox

import (
	"fmt"
	"net/http"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// entrypointSessionID names the session that runs the sandbox's entrypoint,
// as on Daytona. Clients cannot create a session of that name.
const entrypointSessionID = "entrypoint"

// startEntrypoint runs command as the only command of the entrypoint
// session, asynchronously, with a stdin that session input writes to.
func (ss *sessions) startEntrypoint(command string) error {
	if err := validCommand(command); err != nil {
		return fmt.Errorf("toolbox: entrypoint: %v", err)
	}
	sess, err := ss.start(entrypointSessionID, true)
	if err != nil {
		return fmt.Errorf("toolbox: entrypoint: %v", err)
	}
	c, err := sess.exec(command, execOptions{async: true})
	if err != nil {
		ss.remove(entrypointSessionID)
		return fmt.Errorf("toolbox: entrypoint: %v", err)
	}
	sess.mu.Lock()
	sess.entry = c
	sess.mu.Unlock()
	return nil
}

// entrypoint returns the entrypoint session and its command. 404 when the
// toolbox was started without one (as Daytona's daemon answers a sandbox
// whose image has no entrypoint) or it was deleted.
func (ss *sessions) entrypoint() (*session, *sessionCommand, error) {
	sess, err := ss.reg.get(entrypointSessionID)
	if err != nil {
		return nil, nil, codedf(http.StatusNotFound, wire.CodeProcessNotFound, "session not found: this sandbox has no entrypoint session")
	}
	sess.mu.Lock()
	c := sess.entry
	sess.mu.Unlock()
	if c == nil {
		return nil, nil, codedf(http.StatusNotFound, wire.CodeProcessNotFound, "session not found: this sandbox has no entrypoint session")
	}
	return sess, c, nil
}
