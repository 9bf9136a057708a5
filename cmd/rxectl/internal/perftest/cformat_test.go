package perftest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// cFormatRE builds a regexp matching exactly what C's printf prints for a
// format, with one group per conversion (value and padding). It knows the
// conversions perftest's output uses: %s, %d, %lu, %llu, %f, %lf with an
// optional "-" or "0" or "#0" flag, width and precision, and %x/%llx with
// "#0". Literal text, tabs included, must match byte for byte.
func cFormatRE(format string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	spec := regexp.MustCompile(`^%([-#0]*)(\d*)(?:\.(\d+))?(l{0,2})([sdufx%])`)
	for i := 0; i < len(format); {
		if format[i] != '%' {
			j := strings.IndexByte(format[i:], '%')
			if j < 0 {
				j = len(format) - i
			}
			b.WriteString(regexp.QuoteMeta(format[i : i+j]))
			i += j
			continue
		}
		m := spec.FindStringSubmatch(format[i:])
		if m == nil {
			panic("unsupported conversion at " + format[i:])
		}
		i += len(m[0])
		flags, conv := m[1], m[5]
		width, _ := strconv.Atoi(m[2])
		prec := -1
		if m[3] != "" {
			prec, _ = strconv.Atoi(m[3])
		}
		b.WriteString("(" + convRE(flags, width, prec, conv) + ")")
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// convRE is the regexp of one conversion.
func convRE(flags string, width, prec int, conv string) string {
	left := strings.Contains(flags, "-")
	alt := strings.Contains(flags, "#")
	zero := strings.Contains(flags, "0") && !left
	digit, lead := `\d`, `[1-9]`
	if conv == "x" {
		digit, lead = `[0-9a-f]`, `[1-9a-f]`
	}
	// num(L) is an integer of exactly L digits, numAtLeast(L) one of L or
	// more, both without leading zeros.
	num := func(L int) string {
		if L == 1 {
			return digit
		}
		return fmt.Sprintf(`%s%s{%d}`, lead, digit, L-1)
	}
	numAtLeast := func(L int) string {
		if L <= 1 {
			return fmt.Sprintf(`(?:%s|%s%s+)`, digit, lead, digit)
		}
		return fmt.Sprintf(`%s%s{%d,}`, lead, digit, L-1)
	}
	body, atLeast := num, numAtLeast
	minLen := 1
	switch conv {
	case "%":
		return "%"
	case "s":
		return ".*?"
	case "x":
		if alt && zero {
			// C's "#" flag: the width includes "0x"; zero prints with no
			// prefix at all.
			d := max(width-2, 1) // digits after "0x", zero-padded, value not 0
			var nz []string
			for i := 0; i < d; i++ {
				nz = append(nz, fmt.Sprintf(`0{%d}[1-9a-f][0-9a-f]{%d}`, i, d-1-i))
			}
			return fmt.Sprintf(`0{%d}|0x(?:%s|[1-9a-f][0-9a-f]{%d,})`, max(width, 1), strings.Join(nz, "|"), d)
		}
		fallthrough
	case "d", "u":
		if zero {
			return fmt.Sprintf(`%s{%d}|%s`, digit, width, numAtLeast(width+1))
		}
	case "f":
		if prec < 0 {
			prec = 6
		}
		frac := fmt.Sprintf(`\.\d{%d}`, prec)
		minLen = prec + 2
		body = func(k int) string { return num(k-prec-1) + frac }
		atLeast = func(k int) string { return "(?:" + numAtLeast(k-prec-1) + ")" + frac }
	}
	if width <= minLen {
		return atLeast(minLen)
	}
	var alts []string
	for k := minLen; k < width; k++ {
		pad := strings.Repeat(" ", width-k)
		if left {
			alts = append(alts, body(k)+pad)
		} else {
			alts = append(alts, pad+body(k))
		}
	}
	alts = append(alts, atLeast(width))
	return strings.Join(alts, "|")
}

// fields returns the trimmed values of a line matched by re.
func fields(t *testing.T, re *regexp.Regexp, line string) []string {
	t.Helper()
	m := re.FindStringSubmatch(line)
	require.NotNil(t, m, "line %q does not match %s", line, re)
	out := m[1:]
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// perftest's formats (perftest_parameters.h, perftest_communication.h;
// protocol reference §5.4). PRIu64 is "lu" on 64-bit Linux.
const (
	fmtReport    = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
	fmtReportExt = " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf"
	fmtReportLat = " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"
	fmtBasicAddr = " %s address: LID %#04x QPN %#06x PSN %#06x"
	fmtReadAddr  = " OUT %#04x"
	fmtRDMAAddr  = " RKey %#08x VAddr %#016llx"
	fmtGID       = " %s: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d"
)

// TestCFormatRE checks the regexp builder against glibc's printf output
// for the same formats (values printed by hand with printf(3)).
func TestCFormatRE(t *testing.T) {
	tests := []struct {
		format string
		ok     []string
		bad    []string
	}{
		{"%-7lu|", []string{"65536  |", "2      |", "8388608|", "12345678|", "0      |"}, []string{"65536 |", "65536   |", "065536 |"}},
		{"%-7.2lf|", []string{"0.50   |", "10934.23|", "1234.50|"}, []string{"0.5    |", "0.50  |", "10934.230|"}},
		{"%#04x|", []string{"0000|", "0x11|", "0x80|", "0x123|"}, []string{"0x0000|", "0x00|", "0x011|", "11|"}},
		{"%#06x|", []string{"0x0011|", "0x8d6a0b|", "000000|"}, []string{"0x11|", "0x00011|"}},
		{"%02d:", []string{"00:", "07:", "255:"}, []string{"7:", "007:"}},
		{"%lu ", []string{"20 ", "1000 "}, []string{"020 ", " 20 "}},
	}
	for _, tc := range tests {
		re := cFormatRE(tc.format)
		for _, s := range tc.ok {
			require.Regexp(t, re, s, "%s", tc.format)
		}
		for _, s := range tc.bad {
			require.NotRegexp(t, re, s, "%s", tc.format)
		}
	}
	// Our own C-printf helpers against the same regexps.
	require.Regexp(t, cFormatRE(fmtReport), strings.TrimSuffix(report.BWRow(report.BW{Size: 65536, Iters: 1000, Peak: 10934.234, Avg: 10930.11, MsgRate: 0.174882}, false), "\n"))
	require.Regexp(t, cFormatRE(fmtReportExt), strings.TrimSuffix(report.BWRow(report.BW{Size: 2, Iters: 5, Peak: 0.01, Avg: 0.009, MsgRate: 0.5}, true), "\n"))
	require.Regexp(t, cFormatRE(fmtReportLat), strings.TrimSuffix(report.LatRow(report.Lat{Size: 2, Iters: 1000, Min: 2.37, Max: 5.03, Typical: 2.42, Avg: 2.46, Stdev: 0.1, P99: 3.01, P999: 5.03}), "\n"))
}
