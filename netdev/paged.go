package netdev

// PagedTruesize bounds the kernel memory a receiving socket on this host
// is charged (skb->truesize) for a datagram of n bytes that UDPConn sent
// paged (UDPConn.PagesTo): the n bytes in page fragments, a head buffer
// for the headers and struct skb_shared_info (576 bytes on Linux 6.18 with
// 17 fragments per skb, at most 1 KiB with 45) and struct sk_buff (256
// bytes). Loopback measures n + 832 on Linux 6.18 (TestPagedSends).
func PagedTruesize(n int) int { return n + pagedOverhead }

// RunTruesize bounds the kernel memory per datagram that a receiving
// socket on this host with UDP_GRO on is charged for a GSO run of segs
// datagrams of n bytes that UDPConn sent (UDPConn.RunsTo): the loopback
// device does not segment the run and a UDP_GRO socket queues it whole
// (udp_queue_rcv_skb), so the run is one buffer whose overhead its
// datagrams share. Loopback measures at most n + 832/segs
// (TestGSORunCharge).
func RunTruesize(n, segs int) int { return n + pagedOverhead/max(segs, 1) }

// pagedOverhead is what PagedTruesize adds to a datagram's length.
const pagedOverhead = 1024 + 256
