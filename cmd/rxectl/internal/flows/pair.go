package flows

import "github.com/gorxe/gorxe/packet"

// group is a connection being built: one or two flow indices.
type group struct {
	flows []int
	conn  *Connection
}

// pair groups the flows into connections. Two flows are the two directions
// of one connection when their addresses are reversed and the responses of
// each answer PSNs of the other's requests; with a single candidate in each
// direction, a flow that carries responses is paired even without a PSN
// match (its requests may be outside the capture).
func (a *Analyzer) pair() []*group {
	reqPSNs, respPSNs := a.psnSets()
	partner := a.partners(reqPSNs, respPSNs)
	var out []*group
	done := make([]bool, len(a.flows))
	for i := range a.flows { // flows are in order of their first packet
		if done[i] {
			continue
		}
		g := &group{flows: []int{i}}
		done[i] = true
		if j := partner[i]; j >= 0 {
			done[j] = true
			g.flows = append(g.flows, j)
			if len(reqPSNs[j]) > len(reqPSNs[i]) {
				g.flows[0], g.flows[1] = j, i
			}
		}
		g.conn = &Connection{}
		for _, fi := range g.flows {
			g.conn.Flows = append(g.conn.Flows, a.flows[fi])
		}
		out = append(out, g)
	}
	return out
}

// psnSets returns, per flow, the PSNs of its requests and of its responses.
func (a *Analyzer) psnSets() (reqPSNs, respPSNs []map[packet.PSN]bool) {
	reqPSNs = make([]map[packet.PSN]bool, len(a.flows))
	respPSNs = make([]map[packet.PSN]bool, len(a.flows))
	for i := range a.flows {
		reqPSNs[i], respPSNs[i] = map[packet.PSN]bool{}, map[packet.PSN]bool{}
	}
	for _, r := range a.recs {
		switch {
		case r.mask&packet.MaskReq != 0:
			reqPSNs[r.flow][r.psn] = true
		case r.mask&packet.MaskAck != 0:
			respPSNs[r.flow][r.psn] = true
		}
	}
	return reqPSNs, respPSNs
}

// partners pairs each flow with the reversed flow whose responses answer
// most of its requests (and the other way round), or -1.
func (a *Analyzer) partners(reqPSNs, respPSNs []map[packet.PSN]bool) []int {
	score := func(i, j int) int {
		n := 0
		for p := range respPSNs[j] {
			if reqPSNs[i][p] {
				n++
			}
		}
		for p := range respPSNs[i] {
			if reqPSNs[j][p] {
				n++
			}
		}
		return n
	}
	reversed := func(i, j int) bool {
		fi, fj := a.flows[i], a.flows[j]
		return fi.Src.Addr() == fj.Dst.Addr() && fi.Dst.Addr() == fj.Src.Addr() && i != j
	}
	partner := make([]int, len(a.flows))
	for i := range partner {
		partner[i] = -1
	}
	for i := range a.flows {
		if partner[i] >= 0 {
			continue
		}
		best, bestScore, cands := -1, 0, 0
		for j := range a.flows {
			if partner[j] >= 0 || !reversed(i, j) {
				continue
			}
			cands++
			if s := score(i, j); s > bestScore {
				best, bestScore = j, s
			}
		}
		if best < 0 && cands == 1 {
			for j := range a.flows {
				if partner[j] < 0 && reversed(i, j) && (len(respPSNs[i]) > 0 || len(respPSNs[j]) > 0) {
					best = j
				}
			}
		}
		if best >= 0 {
			partner[i], partner[best] = best, i
		}
	}
	return partner
}
