// Command rxectl is gorxe's command-line tool.
//
// Usage:
//
//	rxectl <command> [flags] [arguments]
//
// Commands:
//
//	dump        decode the RoCEv2 packets of a pcap or pcapng capture
//	trace       print a QP trace (--trace) as a timeline, or draw it as a ladder
//	read-bw     perftest's ib_read_bw (also write-bw, send-bw, atomic-bw)
//	read-lat    perftest's ib_read_lat (also write-lat, send-lat, atomic-lat)
//	help        show help for rxectl or one command
//	version   print the version of rxectl
//
// Run "rxectl help <command>" for a command's flags. Exit status: 0 on
// success, 1 when a command fails, 2 for a usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/dump"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/perftest"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/trace"
)

// command is one rxectl subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	run     func(args []string, stdout, stderr io.Writer) int
	help    func(w io.Writer) // writes the command's detailed help
}

// commands lists the subcommands in the order "rxectl help" shows them:
// dump and trace, then the perftest-style ones.
var commands = func() []command {
	cs := []command{{name: "dump", summary: "decode the RoCEv2 packets of a pcap or pcapng capture",
		run: func(args []string, stdout, stderr io.Writer) int { return dump.Run(args, os.Stdin, stdout, stderr) }, help: dump.Usage},
		{name: "trace", summary: "print a QP trace (--trace) as a timeline, or draw it as a ladder",
			run: trace.Run, help: trace.Usage}}
	for _, t := range perftest.Tests {
		cs = append(cs, command{name: t.Name(), summary: t.Summary(),
			run:  func(args []string, stdout, stderr io.Writer) int { return t.Run(args, stdout, stderr, interrupt) },
			help: t.Usage})
	}
	return cs
}()

// interrupt is the context of a measurement: the first Ctrl-C ends it
// cleanly (what was measured is printed); a second one kills the process.
func interrupt() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	context.AfterFunc(ctx, stop)
	return ctx
}

func main() {
	perftest.ShareHostCPUs() // this process is one end of a test (or both, with --loopback)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a subcommand and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(rest, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "rxectl", version())
		return cli.ExitOK
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(rest, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "rxectl: unknown command %q\n\n", name)
	usage(stderr)
	return cli.ExitUsage
}

// runHelp implements "rxectl help [command]".
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return cli.ExitOK
	}
	if len(args) > 1 {
		fmt.Fprintln(stderr, "usage: rxectl help [command]")
		return cli.ExitUsage
	}
	for _, c := range commands {
		if c.name == args[0] {
			c.help(stdout)
			return cli.ExitOK
		}
	}
	fmt.Fprintf(stderr, "rxectl help: unknown command %q\n\n", args[0])
	usage(stderr)
	return cli.ExitUsage
}

// usage writes the top-level usage text.
func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("rxectl is the command-line tool of gorxe, soft-RoCE (RoCEv2) in pure Go.\n\n")
	b.WriteString("Usage:\n\n\trxectl <command> [flags] [arguments]\n\nCommands:\n\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-12s%s\n", c.name, c.summary)
	}
	fmt.Fprintf(&b, "\t%-12s%s\n", "help", "show help for rxectl or one command")
	fmt.Fprintf(&b, "\t%-12s%s\n", "version", "print the version of rxectl")
	b.WriteString("\nRun \"rxectl help <command>\" for a command's flags.\n")
	io.WriteString(w, b.String())
}

// version returns the module version and, when the binary was built with
// VCS stamping, the revision.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v + " " + bi.GoVersion
}
