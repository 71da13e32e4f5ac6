// Package store keeps the simulator's sandbox records findable: by id, by
// name within an organization, and per organization in creation order, in
// activity order, by label and by the sandbox each is linked to. Each
// index costs what a lookup, a list page, a cascade or a count returns
// rather than what the store holds: 10,000 rows of other organizations, or
// with other labels, are never walked.
//
// The store knows nothing of HTTP, states or backends: a record is any Row
// that can say its Keys. Nothing in it locks. Its caller holds Lock
// around every call, shared for the reads (Get, Page and the counts) and
// exclusive for the rest, so that a list never holds up a get.
package store
