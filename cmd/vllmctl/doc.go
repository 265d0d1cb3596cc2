// Package main holds vllmctl's command layer: thin cobra commands that turn
// flags (bound through one viper instance to VLLMCTL_* environment variables
// and the config file) into options, call the charts, release, wait and diff
// packages, and print results through IOStreams (progress and diagnoses
// with the printers of internal/termout). Only this tree imports
// cobra or viper, and only main exits.
package main
