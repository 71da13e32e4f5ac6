// Package cost is the simulator's cost ledger: what each sandbox would have
// cost on Daytona, from the seconds it spent billed as running (compute
// and disk) or stopped (disk only), priced per second.
//
// A Ledger follows one sandbox and outlives it; a Book keeps the ledgers so
// that a Report stays exact while its memory stays bounded: a row per live
// sandbox and per recently deleted one, and per organization the sums of
// the deleted ones beyond that. Neither locks: the simulator calls them
// under its store's lock.
package cost
