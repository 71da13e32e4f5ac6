//go:build linux

package main

// config is what the test tells the probe: the best knowledge an attacker
// in the sandbox could have of the machine (addresses, ids, where the
// daemon keeps its state), never a secret.
type config struct {
	// Hosts are the names under which the probe looks for host services:
	// 127.0.0.1, and from a container the engine's host alias.
	Hosts []string `json:"hosts"`
	// DaemonPort is the port of `sandplane serve`.
	DaemonPort int `json:"daemonPort"`
	// SimPort is the port of `sandplane sim`.
	SimPort int `json:"simPort"`
	// HostServicePort is a host service on loopback that answers a canary.
	HostServicePort int `json:"hostServicePort"`
	// Neighbour is the other sandbox.
	Neighbour neighbour `json:"neighbour"`
	// Paths are files to read: the daemon's token file, the neighbour's
	// files in the daemon root, a canary of the host user.
	Paths []string `json:"paths"`
	// HostFile is a canary file of the host user, outside every sandbox.
	HostFile string `json:"hostFile"`
	// Walk are directories to walk and read, bounded: the daemon root.
	Walk []string `json:"walk"`
	// DockerSockets are where an engine's socket usually is.
	DockerSockets []string `json:"dockerSockets"`
	// WorkDir is where the probe may write: its own sandbox's files.
	WorkDir string `json:"workDir"`
	// TokenSearch are directories where the probe looks for files whose
	// name holds "token" (a token file), a few levels deep.
	TokenSearch []string `json:"tokenSearch"`
	// Fill allows the disk filler: the test saw, from the host, a quota
	// of the sandbox's own.
	Fill bool `json:"fill"`
	// Bomb allows the fork bomb: the test saw, from the host, a pids
	// limit of the sandbox's own.
	Bomb bool `json:"bomb"`
	// Links are the symlinks `probe links` makes, name (in WorkDir) to
	// target.
	Links map[string]string `json:"links"`
}

type neighbour struct {
	ID string `json:"id"`
	// Toolbox are base URLs of its toolbox: its host port on each of
	// Hosts, its container address.
	Toolbox []string `json:"toolbox"`
	// PreviewPath is its preview under the daemon (/preview/<port>-<id>/).
	PreviewPath string `json:"previewPath"`
	// PIDs are its processes as the host numbers them.
	PIDs []int `json:"pids"`
}
