// Package gorxe is soft-RoCE in pure Go: the InfiniBand transport over UDP
// port 4791 (RoCEv2), in user space, wire-compatible with the Linux kernel's
// rxe driver and RDMA NICs.
//
// This root package holds no code, only the repository-wide tests: the
// package dependency rule (layering_test.go) and gofmt (format_test.go).
// The verbs API is package rxe; the wire formats are package packet; the
// command-line tool is cmd/rxectl. See README.md and DEVELOPERS.md.
package gorxe
