//go:build !unix

package toolbox

import "errors"

func mkfifo(string) error { return errors.New("named pipes are not supported on this system") }
