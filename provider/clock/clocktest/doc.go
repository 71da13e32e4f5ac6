// Package clocktest provides Fake, a manually advanced clock.Clock for tests.
package clocktest
