// Command benchreport reads `go test -bench` output and prints every figure
// that was measured beside a baseline (metrics ms/op-subject, ms/op-baseline
// and x-baseline) as one table, so `make bench` ends with the ratios.
package main
