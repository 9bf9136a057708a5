package ladder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/packet"
)

// Selection chooses what of a capture to draw.
type Selection struct {
	// QP, when HasQP, picks the connection one of whose flows goes to
	// that QP; otherwise the connection with the most packets is drawn.
	QP    uint32
	HasQP bool
	// Frames, when not zero, keeps frames From..To (inclusive).
	FromFrame, ToFrame int
	// FromTime and ToTime, when ToTime is not zero, keep the packets this
	// long after Start.
	FromTime, ToTime time.Duration
	// Start is the time stamp of the capture's first frame, RoCEv2 or not
	// (rxectl dump's time column counts from it); zero: the first packet
	// of those given to FromCapture.
	Start time.Time
}

// ErrNoPackets: the selection holds no packet.
var ErrNoPackets = errors.New("no RoCEv2 packet in the selection")

// FromCapture builds the diagram of one connection of a capture, with the
// flow analysis rep of the same packets marking what went wrong. Packet
// times are taken monotonically (flows.Clock). Packets with a bad ICRC
// (flows.Packet.BadICRC) are not drawn.
func FromCapture(pkts []flows.Packet, rep *flows.Report, sel Selection) (*Diagram, error) {
	var conn *flows.Connection
	for _, c := range rep.Connections {
		if sel.HasQP {
			for _, f := range c.Flows {
				if f.DestQP == sel.QP {
					conn = c
				}
			}
			if conn != nil {
				break
			}
		} else if conn == nil || packets(c) > packets(conn) {
			conn = c
		}
	}
	if conn == nil {
		if sel.HasQP {
			return nil, fmt.Errorf("no flow to QP %#x in the capture", sel.QP)
		}
		return nil, ErrNoPackets
	}
	req := conn.Flows[0]
	d := &Diagram{Title: "RoCE ladder: " + conn.Title(), Left: "requester " + req.Src.String(), Right: "responder " + req.Dst.String()}
	if len(conn.Flows) == 1 {
		d.Title = "RoCE ladder: " + conn.Title() + " (one direction only)"
	}
	// Times are made monotonic as the flow analysis makes them, so a
	// frame stamped before the one ahead of it is drawn at that frame's
	// time and no stamp or silence is negative.
	var clock flows.Clock
	first := sel.Start
	for _, p := range pkts {
		if p.BadICRC {
			continue // the receiver dropped it: not drawn
		}
		p.Time = clock.Next(p.Time)
		if first.IsZero() {
			first = p.Time
		}
		if !inConn(conn, p) || !sel.keep(p, first) {
			continue
		}
		right := p.Src == req.Src && p.Pkt.DestQP() == req.DestQP
		d.add(p, rep.Notes[p.Ref()], right)
	}
	if len(d.Items) == 0 {
		return nil, ErrNoPackets
	}
	return d, nil
}

func packets(c *flows.Connection) int {
	n := 0
	for _, f := range c.Flows {
		n += f.Packets
	}
	return n
}

func inConn(c *flows.Connection, p flows.Packet) bool {
	for _, f := range c.Flows {
		if f.Holds(p) {
			return true
		}
	}
	return false
}

func (s Selection) keep(p flows.Packet, first time.Time) bool {
	if s.ToFrame > 0 && (p.Frame < s.FromFrame || p.Frame > s.ToFrame) {
		return false
	}
	if s.ToTime > 0 {
		t := p.Time.Sub(first)
		return t >= s.FromTime && t <= s.ToTime
	}
	return true
}

// add appends the items of one packet: a loss mark or a timeout first when
// the analysis saw one, then the arrow.
func (d *Diagram) add(p flows.Packet, n *flows.Note, right bool) {
	dir := ToRight
	if !right {
		dir = ToLeft
	}
	op := p.Pkt.Opcode()
	psn := uint32(p.Pkt.PSN())
	kind := Request
	if p.Pkt.Mask()&packet.MaskAck != 0 {
		kind = Response
	}
	name := shortOp(op)
	label := fmt.Sprintf("%s %d", name, psn)
	if a := p.Pkt.AETH(); a != nil {
		syn := a.Syndrome()
		switch {
		case syn.IsRNR():
			kind = RNR
			label = fmt.Sprintf("RNR NAK %d timer %d MSN %d", psn, syn.Value(), a.MSN())
		case syn.IsNAK():
			kind = NAK
			label = fmt.Sprintf("NAK %s %d MSN %d", syn.NAKCode(), psn, a.MSN())
		case op == packet.RCAcknowledge:
			label = fmt.Sprintf("ACK %d MSN %d", psn, a.MSN())
		default:
			label += fmt.Sprintf(" MSN %d", a.MSN())
		}
	}
	if r := p.Pkt.RETH(); r != nil && p.Pkt.Mask()&packet.MaskRead != 0 {
		label += " len " + sizeText(r.DMALen())
	}
	if op == packet.CNP {
		// Its PSN is reserved (IBA A17.9.2): the label has none.
		d.Items = append(d.Items, Item{Kind: CNP, Dir: dir, Time: p.Time, Frame: p.Frame, Label: "CNP", PSN: psn})
		return
	}
	fold := ""
	if p.Pkt.Mask()&packet.MaskMiddle != 0 {
		fold = name
	}
	if n != nil && n.Gap > 0 {
		span := fmt.Sprint(n.GapPSN)
		if n.Gap > 1 {
			span += fmt.Sprintf("-%d", packet.PSN(n.GapPSN).Add(n.Gap-1))
		}
		// A gap whose PSNs packets with a bad ICRC carried was corrupted
		// before the capture point, as dump --flows explains it.
		label := "lost: PSN " + span
		switch {
		case n.GapCorrupt >= n.Gap:
			label = fmt.Sprintf("corrupted: PSN %s (bad ICRC, frame %d)", span, n.GapCorruptFrame)
		case n.GapCorrupt > 0:
			label += fmt.Sprintf(" (%d corrupted: bad ICRC, frame %d)", n.GapCorrupt, n.GapCorruptFrame)
		}
		d.Items = append(d.Items, Item{Kind: Lost, Dir: dir, Time: p.Time, Label: label})
	}
	if n != nil {
		if n.Cause == flows.CauseTimeout {
			d.Items = append(d.Items, Item{Kind: Timeout, Dir: Across, Time: p.Time,
				Label: "retransmission timeout: " + flows.Human(n.Silence) + " of silence"})
		}
		if n.LostAfter {
			d.Items = append(d.Items, Item{Kind: Lost, Dir: dir, Time: p.Time, Frame: p.Frame, Label: label + ": lost after the capture point", Cut: true, PSN: psn})
			return
		}
		if n.Resent && kind != NAK && kind != RNR {
			kind = Resent
			if n.Cause != "" && n.Cause != flows.CauseTimeout {
				label += " (" + string(n.Cause) + ")"
			}
		}
	}
	d.Items = append(d.Items, Item{Kind: kind, Dir: dir, Time: p.Time, Frame: p.Frame, Label: label, Fold: fold, PSN: psn})
}

// shortOp is the opcode's name without the transport prefix for RC
// ("READ_RESPONSE_FIRST"), with it for the others ("UC_SEND_ONLY").
func shortOp(op packet.Opcode) string {
	s := op.String()
	s = strings.TrimPrefix(s, "RC_")
	return strings.Replace(s, "RDMA_", "", 1)
}

func sizeText(n uint32) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d", n)
}
