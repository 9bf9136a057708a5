// Package report formats what rxectl's perftest commands print: perftest's
// tables with C printf semantics (protocol reference §5.4;
// perftest_parameters.c: print_report_bw, print_full_bw_report,
// print_report_lat), the statistics of latency and bandwidth runs, and the
// counters printed or encoded as JSON after a run with faults or a capture.
package report
