package engine

// Raw states (Daytona's SandboxState).
const (
	Unknown          = "unknown"
	Creating         = "creating"
	Starting         = "starting"
	Started          = "started"
	Stopping         = "stopping"
	Stopped          = "stopped"
	Destroying       = "destroying"
	Destroyed        = "destroyed"
	Archiving        = "archiving"
	Archived         = "archived"
	Restoring        = "restoring"
	Error            = "error"
	BuildFailed      = "build_failed"
	PendingBuild     = "pending_build"
	BuildingSnapshot = "building_snapshot"
	Pausing          = "pausing"
	Paused           = "paused"
	Resuming         = "resuming"
)

// Desired states (Daytona's SandboxDesiredState). They share their spelling
// with the raw states they lead to, so a settled sandbox has State ==
// Desired.
const (
	WantDestroyed = Destroyed
	WantStarted   = Started
	WantStopped   = Stopped
	WantArchived  = Archived
	WantPaused    = Paused
)

// Errored reports whether state is one a sandbox stays in until it is
// started again or deleted.
func Errored(state string) bool { return state == Error || state == BuildFailed }
