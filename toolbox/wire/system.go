package wire

// InitializeRequest is the body of POST /init.
type InitializeRequest struct {
	Token string `json:"token"`
}

// UpdateEnvRequest is the body of POST /env (toolbox releases after
// v0.190.0; the SDK's sandbox.updateEnv).
type UpdateEnvRequest struct {
	// Set maps names to values that every process started afterwards
	// (execute, code-run, sessions, PTYs, interpreters, git, LSP) inherits.
	Set map[string]string `json:"set"`
	// Unset names variables to remove before Set is applied.
	Unset []string `json:"unset"`
	// UnsetValuePrefix removes every variable whose value starts with it
	// and whose name is not a key of Set, before Set is applied.
	UnsetValuePrefix string `json:"unsetValuePrefix"`
}

// SystemMetrics is the answer of GET /system/metrics (toolbox releases
// after v0.190.0; the SDK's sandbox.getMetricsLatest): one current sample.
// Sizes are bytes.
type SystemMetrics struct {
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	DiskFree      uint64  `json:"diskFree"`
	DiskTotal     uint64  `json:"diskTotal"`
	DiskUsed      uint64  `json:"diskUsed"`
	MemCache      uint64  `json:"memCache"`
	MemTotal      uint64  `json:"memTotal"`
	MemUsed       uint64  `json:"memUsed"`
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
}

// PortList answers GET /port.
type PortList struct {
	Ports []int `json:"ports"`
}

// IsPortInUseResponse answers GET /port/{port}/in-use.
type IsPortInUseResponse struct {
	IsInUse bool `json:"isInUse"`
}
