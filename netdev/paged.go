package netdev

// PagedTruesize bounds the kernel memory a receiving socket on this host
// is charged (skb->truesize) for a datagram of n bytes that UDPConn sent
// paged (UDPConn.PagesTo): the n bytes in page fragments, a head buffer
// for the headers and struct skb_shared_info (a 512-byte kmalloc on a
// stock kernel, at most 1 KiB with 45 fragments per skb) and struct
// sk_buff (256 bytes). Loopback measures n + 832 on Linux 6.18.
func PagedTruesize(n int) int { return n + pagedOverhead }

// pagedOverhead is what PagedTruesize adds to a datagram's length.
const pagedOverhead = 1024 + 256
