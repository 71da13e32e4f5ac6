// Package poolsim plays a day of agent traffic against provider/pool on the
// simulator, on a fake clock, under three policies (no pool, park-to-stopped,
// park-to-running), and says what each costs and how long turns wait.
//
// The wait is a stage model: a turn pays the stages of the path it took.
// Create and start from stopped are the simulator's latencies (its profile
// takes them from Stages); the rest are host-side stages charged on the
// fake clock:
//
//	created: create + harness respawn + mounts + services hop + checkout
//	resumed: start  + harness respawn + mounts + services hop + checkout
//	warm:                                       services hop + checkout
//
// A stopped sandbox keeps its files but not its processes, so a resumed
// turn still respawns the harness and remounts: only a sandbox parked
// running skips the pipeline. DefaultStages holds the measured split; a
// host reruns the model with its own (`sandplane pool simulate --stages
// stages.json`) and its own traffic, and gets the same table `make bench`
// prints.
//
// The driver jumps the clock from event to event whenever the process is
// quiet, so a day takes seconds, and on an idle machine the same seed gives
// the same figures (on a loaded one a late goroutine can shift a few).
// It reads the whole process's scheduler: run one simulation at a time, in
// a process that does nothing else meanwhile (a test binary, the CLI).
package poolsim
