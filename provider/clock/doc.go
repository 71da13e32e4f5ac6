// Package clock is the single source of time for sandplane.
//
// Every timer, ticker and deadline in non-test code goes through a Clock so
// that tests can drive time with clocktest.Fake and end-to-end runs can shrink
// an interval minute (--minute) without sleeping for real.
package clock
