package secrets

import (
	"errors"
	"net/http"
)

// The store's errors wrap one of these, so that a handler maps them with
// errors.Is or HTTPStatus; the wrapping message says which field failed
// and never quotes a value.
var (
	ErrInvalid  = errors.New("invalid")
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// HTTPStatus is the status Daytona's API answers an error of the store
// with: 400, 404 or 409, and 500 for anything else.
func HTTPStatus(err error) int {
	switch {
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
