// Package cmsgtest reads what a test's socket learned from its control
// messages: the tests of netdev and rxe that check the IP traffic class
// of the datagrams they receive (IP_RECVTOS, IPV6_RECVTCLASS).
// Its reader is for unix platforms (control messages as
// golang.org/x/sys/unix parses them); elsewhere the package is empty.
package cmsgtest
