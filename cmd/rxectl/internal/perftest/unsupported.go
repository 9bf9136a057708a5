package perftest

import (
	"fmt"
	"strings"
)

// perftestOnly are perftest flags rxectl does not take, by their names
// without dashes, with what to do instead or why. A command line written
// for perftest then fails on such a flag with that reason, not only with
// the flag package's "flag provided but not defined".
var perftestOnly = map[string]string{
	"C":                  "-C (--report-cycles): rxectl times with the operating system's monotonic clock and reports microseconds; it reads no CPU cycle counter",
	"report-cycles":      "-C (--report-cycles): rxectl times with the operating system's monotonic clock and reports microseconds; it reads no CPU cycle counter",
	"S":                  "-S (--sl): the service level of RoCE is the VLAN priority a NIC sets; gorxe sends through a UDP socket and sets none",
	"sl":                 "-S (--sl): the service level of RoCE is the VLAN priority a NIC sets; gorxe sends through a UDP socket and sets none",
	"L":                  hopLimitWhy,
	"hop_limit":          hopLimitWhy,
	"flow_label":         flowLabelWhy,
	"g":                  mcgWhy,
	"mcg":                mcgWhy,
	"M":                  mcgWhy,
	"MGID":               mcgWhy,
	"z":                  "-z (--comm_rdma_cm) is not supported: -R connects the QPs with rdma_cm and runs the exchange over it",
	"comm_rdma_cm":       "-z (--comm_rdma_cm) is not supported: -R connects the QPs with rdma_cm and runs the exchange over it",
	"O":                  "-O (--dualport): a gorxe device has one port",
	"dualport":           "-O (--dualport): a gorxe device has one port",
	"dont_xchg_versions": "--dont_xchg_versions is not supported: rxectl always exchanges versions (perftest 5.70 and later need the peer's: without the exchange they stop with \"not compatible with versions older than 5.70\")",
}

// mcgWhy is why -g and -M are refused by the tests other than the SEND
// ones, as perftest's parser refuses -g.
const mcgWhy = "-g (--mcg) and -M (--MGID): multicast is for the SEND tests (perftest: \"MultiCast feature only available on SEND verb\")"

// flowLabelWhy is why --flow_label is refused: on RoCEv2 a QP's flow
// label chooses the UDP source port of its packets (kernel rxe_modify_qp
// takes it through rdma_get_udp_sport; prepare_ipv6_hdr writes flow
// label 0), and gorxe's QPs all send from the device's sockets, on one
// port.
const flowLabelWhy = "--flow_label sets the GRH flow label of the QPs' address, from which kernel rxe picks the UDP source port of a QP's packets (rxe_modify_qp: rdma_get_udp_sport; its IP headers carry flow label 0); gorxe sends every QP's packets from its device's UDP port"

// hopLimitWhy is why -L is refused, as perftest refuses it for every QP
// but raw Ethernet's.
const hopLimitWhy = "-L (--hop_limit) sets a raw Ethernet QP's hop limit (perftest: \"Hop limit only valid for RawEth QP\"); RoCE packets carry the route's TTL, the host's default, as kernel rxe's do"

// latOnly are the flags only latency tests take (perftest: "Available
// only on Latency tests").
var latOnly = map[string]bool{"H": true, "report-histogram": true, "report-histogrm": true, "U": true, "report-unsorted": true, "loss-wait": true,
	"latency_gap": true}

// bwOnly are the flags only bandwidth tests take.
var bwOnly = map[string]bool{"w": true, "limit_bw": true, "y": true, "limit_msgrate": true, "rate_limit": true,
	"rate_units": true, "rate_limit_type": true, "burst_size": true, "b": true, "bidirectional": true}

// explainFlagError adds to a command-line error of cmd's flags what
// rxectl knows of a flag it does not take: one of perftest's it lacks
// (perftestOnly), one of the latency tests' (latOnly) or one of the
// bandwidth tests' (bwOnly).
func explainFlagError(err error, t Test) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) {
		return err
	}
	name := strings.TrimPrefix(strings.TrimPrefix(msg, undefined), "-")
	switch {
	case latOnly[name] && !t.lat:
		return fmt.Errorf("%w (-%s is for the latency tests)", err, name)
	case bwOnly[name] && t.lat:
		return fmt.Errorf("%w (-%s is for the bandwidth tests)", err, name)
	case perftestOnly[name] != "":
		return fmt.Errorf("%w: perftest's %s", err, perftestOnly[name])
	}
	return fmt.Errorf("%w (rxectl help %s lists the flags it takes)", err, t.cmd)
}
