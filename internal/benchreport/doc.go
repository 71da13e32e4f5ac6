// Command benchreport reads `go test -bench` output and prints every figure
// that was measured beside a baseline as one table, so `make bench` ends
// with the ratios: metrics UNIT-subject and UNIT-baseline (with the
// benchmark's own ratio in x-baseline, when it reports one), and UNIT-after
// and UNIT-before (a growth, such as resident memory before and after a
// churn). Every other custom metric is listed after the table.
package main
