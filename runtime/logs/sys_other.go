//go:build !linux

// The node side runs on Linux only; these let the package build elsewhere
// for what it shares with clients (the kubectl plugin parses its records
// on macOS too).
package logs

func growPipe(int) {}
