package netdev

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// zones caches the host's interface indexes and names, which the zones of
// link-local IPv6 addresses use (a sockaddr_in6's scope ID is an
// interface index, netip's zone its name). Looking an interface up asks
// the kernel over netlink and allocates; a link-local peer's datagrams
// would pay that on every read and write (37 µs and 82 allocations for
// one of each, BenchmarkLinkLocalSockaddr). Package net keeps such a cache
// for its own addresses for the same reason.
var zones zoneTable

// zoneTTL is how long the cached interface table is used before it is read
// again, as package net's zone cache does; zoneRetry is how soon a scope
// ID or name not in it reads it again.
const (
	zoneTTL   = 60 * time.Second
	zoneRetry = time.Second
)

// zoneTable maps interface indexes to names and back. A scope ID no
// interface has is named as its number, and that name is kept until the
// table is read again.
type zoneTable struct {
	mu      sync.RWMutex
	loaded  time.Time // when the interface table was read; zero: never
	byIndex map[uint32]string
	byName  map[string]uint32
}

// name returns the zone of scope ID index: its interface's name, or the
// number where no interface has it.
func (z *zoneTable) name(index uint32) string {
	return lookup(z, func() map[uint32]string { return z.byIndex }, index,
		func(i uint32) string { return strconv.FormatUint(uint64(i), 10) })
}

// index returns the scope ID of zone: a number, or an interface's name (0
// if no interface has it).
func (z *zoneTable) index(zone string) uint32 {
	return lookup(z, func() map[string]uint32 { return z.byName }, zone, func(zone string) uint32 {
		n, _ := strconv.ParseUint(zone, 10, 32) // 0 if not a number
		return uint32(n)
	})
}

// lookup finds k in the map table returns, under z's read lock while the
// table is fresh; else it reads the table again (reload) and, if k is
// still not there, keeps miss(k) for it until the next reload.
func lookup[K comparable, V any](z *zoneTable, table func() map[K]V, k K, miss func(K) V) V {
	z.mu.RLock()
	v, ok := table()[k]
	fresh := time.Since(z.loaded) < zoneTTL
	z.mu.RUnlock()
	if ok && fresh {
		return v
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.reload(ok)
	if v, ok := table()[k]; ok {
		return v
	}
	v = miss(k)
	table()[k] = v
	return v
}

// reload reads the interface table again if it is older than zoneTTL or,
// when the lookup missed (found false), older than zoneRetry (caller holds
// mu for writing). A table that cannot be read leaves the cache as it was.
func (z *zoneTable) reload(found bool) {
	age := time.Since(z.loaded)
	if z.byIndex != nil && (found && age < zoneTTL || !found && age < zoneRetry) {
		return
	}
	ifs, err := net.Interfaces()
	if err != nil && z.byIndex != nil {
		return
	}
	z.byIndex = make(map[uint32]string, len(ifs))
	z.byName = make(map[string]uint32, len(ifs))
	for _, ifi := range ifs {
		z.byIndex[uint32(ifi.Index)] = ifi.Name
		z.byName[ifi.Name] = uint32(ifi.Index)
	}
	z.loaded = time.Now()
}

// zoneName names a scope ID as the interface it belongs to (as net.UDPAddr
// does), or as the number if there is no such interface. Only link-local
// IPv6 addresses have one.
func zoneName(index uint32) string { return zones.name(index) }

// zoneIndex is the scope ID of a zone: an interface name or a number.
func zoneIndex(zone string) uint32 { return zones.index(zone) }
