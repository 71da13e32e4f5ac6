// Package engine is the simulator's lifecycle: the raw states a sandbox
// passes through on its way to the state it is asked for, how long each
// transition takes (a Profile), which of Daytona's crons (auto-stop,
// auto-archive, auto-delete) a sandbox is due for, and the running of one
// step on the clock.
//
// It knows no HTTP, no store and no backend. Plan and Due are pure, so
// their tables are the lifecycle's specification; Begin and Every take the
// clock, so a fake clock drives them. The simulator owns the records and the
// lock: it asks Plan for the next step, lends Begin its lock and the
// backend's part of the step, and applies what Due says under that lock.
package engine
