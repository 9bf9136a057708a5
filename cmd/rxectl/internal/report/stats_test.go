package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteStatsLines checks which lines the end-of-run statistics
// print: go-back-N's doubled retries and READ re-reads only when they
// happened, READ re-reads on the selective-repeat line when that is in
// use, the peer's device after this one's, and the capture's packets,
// those not recorded and the command that decodes it.
func TestWriteStatsLines(t *testing.T) {
	tests := []struct {
		name       string
		st, peer   *Final
		want, none []string
	}{
		{"quiet", &Final{Device: Device{Name: "rxe0", Addr: "10.0.0.1:4791", SentPkts: 3, RcvdPkts: 2}}, nil,
			[]string{" Device rxe0 10.0.0.1:4791: sent 3 packets, received 2;"},
			[]string{"go-back-N", "READ holes", "selective repeat", "Peer device", "Capture"}},
		{"held dropped", &Final{Device: Device{Name: "rxe0", LocalDrops: 4, HeldDropped: 3}}, nil,
			[]string{" local drops 4, held dropped 3, send errors 0,"}, []string{"multicast"}},
		{"multicast", &Final{Device: Device{Name: "rxe0", RcvdPkts: 9, McastRcvd: 7, McastDropped: 2, McastIgnored: 1}}, nil,
			[]string{"   multicast: 7 datagrams delivered to the groups' QPs (counted in received), 2 dropped (no QP attached, or a destination QP not the multicast one), 1 ignored (a wildcard device's other sockets)\n"}, nil},
		{"go-back-N", &Final{Transport: Transport{RetryDoubled: 1, ReadHoleRereads: 5, ReadRereadsLost: 1}}, nil,
			[]string{"   go-back-N: 1 retry sent its first packet twice\n",
				"   READ holes re-read: 5 (1 of them again because the answer was lost)\n"},
			[]string{"selective repeat"}},
		{"selective repeat", &Final{Transport: Transport{ReadHoleRereads: 5, OOOPeak: 1}}, &Final{Device: Device{Name: "rxe1"}},
			[]string{"selective repeat: requester 0 hole reports and 0 progress reports received, 0 packets resent, 5 READ holes re-read",
				" Peer device rxe1 "},
			[]string{"READ holes re-read:", "go-back-N"}},
		{"hole reports received", &Final{Transport: Transport{SRHolesReceived: 3}}, nil,
			[]string{"selective repeat: requester 3 hole reports"}, nil},
		{"capture", &Final{Capture: &Capture{File: "run.pcap", Sent: 7, Received: 5, Skipped: 2, Error: "disk full", Ports: []uint16{4792}}}, nil,
			[]string{" Capture run.pcap: 12 packets (7 sent, 5 received), 2 not recorded, stopped: disk full\n",
				"   decode with: rxectl dump --port 4792 run.pcap\n"},
			nil},
		{"capture complete", &Final{Capture: &Capture{File: "run.pcap", Sent: 7, Received: 5}}, nil,
			[]string{" Capture run.pcap: 12 packets (7 sent, 5 received)\n", "   decode with: rxectl dump run.pcap\n"},
			[]string{"not recorded", "stopped"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			WriteStats(&b, tc.st, tc.peer)
			for _, s := range tc.want {
				require.Contains(t, b.String(), s)
			}
			for _, s := range tc.none {
				require.NotContains(t, b.String(), s)
			}
		})
	}
}

// TestDumpCommandPastes: the "decode with" line is a command a POSIX shell
// runs as printed: a capture file name with spaces or shell characters is
// quoted, one that starts with '-' cannot be taken for a flag, and a plain
// name is left as it is.
func TestDumpCommandPastes(t *testing.T) {
	for _, tc := range []struct {
		file  string
		ports []uint16
		want  string
	}{
		{"/tmp/run.pcap", nil, "rxectl dump /tmp/run.pcap"},
		{"run.pcap", []uint16{18515}, "rxectl dump --port 18515 run.pcap"},
		{"my run.pcap", nil, "rxectl dump 'my run.pcap'"},
		{"it's.pcap", nil, `rxectl dump 'it'\''s.pcap'`},
		{"a$b;c.pcap", nil, "rxectl dump 'a$b;c.pcap'"},
		{"-x.pcap", nil, "rxectl dump ./-x.pcap"},
		{"", nil, "rxectl dump ''"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := Capture{File: tc.file, Ports: tc.ports}
			require.Equal(t, tc.want, c.DumpCommand())
		})
	}
}

// TestDeviceJSONMulticast: the device's multicast counters appear in
// --json under rxe.Counters.Named's names.
func TestDeviceJSONMulticast(t *testing.T) {
	b, err := json.Marshal(Device{McastRcvd: 7, McastDropped: 2, McastIgnored: 1})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, 7.0, m["mcast_rcvd_pkts"])
	require.Equal(t, 2.0, m["mcast_dropped_pkts"])
	require.Equal(t, 1.0, m["mcast_ignored_pkts"])
}
