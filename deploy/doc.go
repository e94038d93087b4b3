// Package deploy holds what an operator deploys beside the binary: a
// Grafana dashboard (grafana/tidemark.json) and Prometheus alert rules
// (prometheus/tidemark.rules.yml, with their promtool unit tests). It has
// no code; its test runs the binary and checks that every series the
// dashboard and the rules query is served, under Redpanda Connect's names.
package deploy
