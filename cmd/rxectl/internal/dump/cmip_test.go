package dump

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestCMIPHeaderOnlyForIPCMService: the private data of a REQ starts with
// the IP addressing header of RDMA CM only when its service ID is an IP CM
// one (IBTA Annex A11.2.1, A11.2.2.1); for any other service ID the
// private data is the consumer's own, and dump must not read addresses out
// of it, however much its first bytes look like that header.
func TestCMIPHeaderOnlyForIPCMService(t *testing.T) {
	line := func(serviceID uint64) string {
		req := &packet.REQ{LocalCommID: 0x1234, ServiceID: serviceID, LocalQPN: 0x42, StartingPSN: 7, PathMTU: 3}
		ip := packet.CMIPHeader{SrcPort: 0xE042, Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.1.2.4")}
		ip.Encode(req.PrivateData[:])
		mad := make([]byte, packet.MADSize)
		packet.EncodeCM(mad, 9, req)
		return madLine(t, mad)
	}
	ipcm := line(packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515))
	require.Contains(t, ipcm, " ip=10.1.2.3:57410→10.1.2.4")
	other := line(0x0002C90300001234) // a service ID outside A11's range
	require.Contains(t, other, " cm=REQ ")
	require.False(t, strings.Contains(other, " ip="), "%s", other)
}
