// Package faults scripts the outcome of a simulator's requests: a Fault
// matches requests by operation, organization and sandbox and answers them
// with a status, holds them, fails the sandbox's next start or makes it
// vanish; Random draws such outcomes at a seeded rate. A Set holds the
// faults in force and consumes them as requests match.
//
// The package decides which fault a request gets; what the outcome means
// for a request (its error body, its headers) is the simulator's.
package faults
