//go:build unix

package cmsgtest

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// cmsg builds one control message of level and type with data.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafePointer(b))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// TestTrafficClass: IP_TOS's byte for IPv4, IPV6_TCLASS's int for IPv6,
// found among other control messages; none, the other family's, a short
// one or a malformed buffer give no class.
func TestTrafficClass(t *testing.T) {
	v6 := make([]byte, 4)
	binary.NativeEndian.PutUint32(v6, 0xb8)
	ttl := cmsg(unix.IPPROTO_IP, unix.IP_TTL, make([]byte, 4))
	for _, tc := range []struct {
		name string
		oob  []byte
		v6   bool
		want uint8
		ok   bool
	}{
		{"v4", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{106}), false, 106, true},
		{"v4 after ttl", append(append([]byte{}, ttl...), cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{4})...), false, 4, true},
		{"v6", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, v6), true, 0xb8, true},
		{"v6 wants IPV6_TCLASS", cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{106}), true, 0, false},
		{"v6 short", cmsg(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, v6[:2]), true, 0, false},
		{"none", ttl, false, 0, false},
		{"empty", nil, false, 0, false},
	} {
		got, ok, err := TrafficClass(tc.oob, tc.v6)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	long := cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{1})
	(*unix.Cmsghdr)(unsafePointer(long)).SetLen(100)
	_, _, err := TrafficClass(long, false)
	require.Error(t, err, "a message longer than the buffer")
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
