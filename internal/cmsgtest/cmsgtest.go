//go:build unix

package cmsgtest

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// TrafficClass returns the IP traffic class that an IP_TOS (IPv4, one
// byte) or IPV6_TCLASS (IPv6, an int) control message among the control
// messages oob gives, and false when there is none.
func TrafficClass(oob []byte, v6 bool) (uint8, bool, error) {
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false, err
	}
	for _, cm := range cms {
		switch {
		case !v6 && cm.Header.Level == unix.IPPROTO_IP && cm.Header.Type == unix.IP_TOS && len(cm.Data) >= 1:
			return cm.Data[0], true, nil
		case v6 && cm.Header.Level == unix.IPPROTO_IPV6 && cm.Header.Type == unix.IPV6_TCLASS && len(cm.Data) >= 4:
			return uint8(binary.NativeEndian.Uint32(cm.Data)), true, nil
		}
	}
	return 0, false, nil
}
