// Command rxectl is gorxe's command-line tool.
//
// Usage:
//
//	rxectl <command> [flags] [arguments]
//
// Commands:
//
//	dump        decode the RoCEv2 packets of a pcap or pcapng capture
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
)

// Exit statuses shared by every command.
const (
	exitOK    = 0 // success
	exitFail  = 1 // the command ran and failed (unreadable input, findings with --strict)
	exitUsage = 2 // bad command line
)

// command is one rxectl subcommand. Perftest-like commands (read-bw,
// write-bw, ...) are added to the commands table the same way.
type command struct {
	name    string
	args    string // argument synopsis, after the command name
	summary string // one line for the command list
	run     func(args []string, stdout, stderr io.Writer) int
	help    func(w io.Writer) // writes the command's detailed help
}

// commands lists the subcommands in the order "rxectl help" shows them.
var commands = []command{
	{name: "dump", args: "[flags] FILE", summary: "decode the RoCEv2 packets of a pcap or pcapng capture", run: runDump, help: dumpUsage},
}

func main() {
	// The first Ctrl-C ends a measurement cleanly (what was measured is
	// printed); a second one kills the process.
	interruptContext = func() context.Context {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		context.AfterFunc(ctx, stop)
		return ctx
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a subcommand and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(rest, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "rxectl", version())
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(rest, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "rxectl: unknown command %q\n\n", name)
	usage(stderr)
	return exitUsage
}

// runHelp implements "rxectl help [command]".
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	if len(args) > 1 {
		fmt.Fprintln(stderr, "usage: rxectl help [command]")
		return exitUsage
	}
	for _, c := range commands {
		if c.name == args[0] {
			c.help(stdout)
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "rxectl help: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
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
