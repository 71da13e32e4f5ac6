package backend

import (
	"context"
	"io"
)

// The optional capabilities of a Backend beyond running workloads. The
// simulator asks for each with a type assertion and, where a backend lacks
// one, keeps Daytona's answers as records only and says so (see
// the simulator's Warning header).

// ImageBackend is implemented by backends whose sandboxes run a snapshot's
// own image (docker). Without it a snapshot is a record, and its sandboxes
// run the default workload.
type ImageBackend interface {
	// PrepareImage makes the image of a snapshot available and returns the
	// reference a Workload names it by: imageName when the engine has it
	// (pulled when it can be), or the image built from dockerfile. logs is
	// what the pull or build printed. A failure reads as the snapshot's
	// errorReason.
	PrepareImage(ctx context.Context, spec ImageSpec) (ref string, logs string, err error)
	// RemoveImage deletes an image PrepareImage built or CommitSandbox
	// made; images it only found are left alone. Idempotent.
	RemoveImage(ctx context.Context, ref string) error
	// CommitSandbox saves the filesystem of a sandbox's workload as an
	// image named after snapshotID and returns its reference.
	CommitSandbox(ctx context.Context, sandboxID, snapshotID string) (ref string, err error)
}

// ImageSpec is what a snapshot is made from: an image name or a
// Dockerfile.
type ImageSpec struct {
	SnapshotID string
	ImageName  string
	Dockerfile string
	Entrypoint []string
	// Logs, when set, gets what the pull or build prints as it prints it,
	// for followers of the build logs.
	Logs io.Writer
}

// VolumeBackend is implemented by backends that give volumes storage and
// mount it into workloads (Workload.Volumes). Without it volumes are
// records and nothing is mounted.
type VolumeBackend interface {
	// CreateVolume makes the storage of a volume. Idempotent.
	CreateVolume(ctx context.Context, volumeID string) error
	// RemoveVolume deletes it and its files. Idempotent.
	RemoveVolume(ctx context.Context, volumeID string) error
	// VolumeMountNote says, for the docs and the warning header, how a
	// mountPath shows up inside this backend's sandboxes.
	VolumeMountNote() string
}

// NetworkBackend is implemented by backends that apply a sandbox's network
// settings to its running workload.
type NetworkBackend interface {
	// ApplyNetwork enforces policy on the running workload of sandboxID
	// (its next start applies Workload.Network by itself). notEnforced
	// says what the backend could not enforce, "" when everything was.
	ApplyNetwork(ctx context.Context, sandboxID string, policy NetworkPolicy) (notEnforced string, err error)
}

// ResizeBackend is implemented by backends that change a running
// workload's CPU and memory.
type ResizeBackend interface {
	// Resize applies cpu (cores) and memory (GiB) to the workload of
	// sandboxID; zero leaves a value as it is.
	Resize(ctx context.Context, sandboxID string, cpu, memoryGiB int) error
}

// NetworkPolicy is a sandbox's network settings.
type NetworkPolicy struct {
	// BlockAll cuts every connection the workload would open outwards.
	BlockAll bool
	// AllowList is Daytona's comma-separated list of CIDRs the workload may
	// still reach when BlockAll is off; empty allows everything.
	AllowList string
}

// VolumeMount is one volume in a Workload.
type VolumeMount struct {
	VolumeID  string
	MountPath string
	Subpath   string
}

// Link puts a workload beside another's so that it reaches it by name.
type Link struct {
	// OwnerID is the sandbox it is linked to.
	OwnerID string
	// OwnerName is the name the owner answers to.
	OwnerName string
}

// NetworkNote is what a backend without NetworkBackend tells the caller.
func NetworkNote(be Backend) string {
	if _, ok := be.(NetworkBackend); ok {
		return ""
	}
	return "network settings are recorded but not enforced on the " + be.Name() + " backend: the workload keeps the host's network"
}

// PauseBackend is implemented by backends that freeze a running workload
// in place, as Daytona's pause does: its processes stop where they are and
// keep their memory, and Resume lets the same processes run on. Without it
// a pause is a state change only.
type PauseBackend interface {
	// Pause freezes the workload of sandboxID and returns once nothing of
	// it runs. Pausing a paused workload is not an error; a sandbox with
	// no running workload is. While paused, Toolbox and Port still route,
	// but nothing answers there.
	Pause(ctx context.Context, sandboxID string) error
	// Resume lets a paused workload run on. Resuming a workload that is
	// not paused is not an error; a sandbox with no running workload is.
	// Stop and Remove resume a paused workload themselves, so that its
	// processes see the SIGTERM of a graceful stop.
	Resume(ctx context.Context, sandboxID string) error
}
