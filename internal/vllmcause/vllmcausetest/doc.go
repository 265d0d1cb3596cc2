// Package vllmcausetest holds what the tests of the cause classifier and
// of the rollout watcher share: a pod as the built-in chart renders it
// (ChartPod, SetArg) and the log fixtures of internal/vllmcause/testdata
// (Fixture, Lines). Only tests import it.
package vllmcausetest
