// Package config resolves the daemon's configuration from, in rising
// precedence, built-in defaults, an optional YAML file, the environment and
// command-line flags.
package config
