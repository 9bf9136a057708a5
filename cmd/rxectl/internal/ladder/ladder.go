// Package ladder draws ladder diagrams of a RoCE connection: the requester
// and the responder as two vertical lanes, time going down, each packet an
// arrow between them labelled with its opcode and PSN. Losses,
// retransmissions, NAKs and timeouts are drawn in colour, with a legend;
// runs of identical MIDDLE packets fold into one labelled band, so a 1 MiB
// READ stays readable. Diagrams are written as SVG, or as PNG with the
// drawing primitives of the plot package.
package ladder

import (
	"fmt"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Kind is how an item is drawn.
type Kind uint8

// Item kinds.
const (
	// Request: a request packet, requester to responder.
	Request Kind = iota
	// Response: an ACK or READ response, responder to requester.
	Response
	// Resent: a packet whose PSN was sent before (a retransmission).
	Resent
	// NAK: a NAK (sequence error, remote access, ...).
	NAK
	// RNR: an RNR NAK.
	RNR
	// Lost: packets the capture shows missing (a PSN gap), drawn as an
	// arrow that stops half way.
	Lost
	// Timeout: a silence the retransmission timer ended, across the lanes.
	Timeout
	// Note: a remark on one lane (a state transition, a timer), no arrow.
	Note
	// CNP: a RoCEv2 congestion notification packet (IBA A17.9.2), from
	// the end that saw ECN marks to the QP whose packets carried them:
	// neither a request nor a response.
	CNP
	numKinds
)

// kindNames are the legend's words for each kind.
var kindNames = [numKinds]string{"request", "response / ACK", "retransmission", "NAK", "RNR NAK", "lost", "timeout", "state / timer",
	"congestion notification (CNP)"}

// Dir is the direction of an item.
type Dir uint8

// Directions.
const (
	// Across: a mark over both lanes (timeouts).
	Across Dir = iota
	// ToRight: from the requester (left lane) to the responder.
	ToRight
	// ToLeft: from the responder to the requester.
	ToLeft
	// OnLeft: a note on the requester's lane.
	OnLeft
	// OnRight: a note on the responder's lane.
	OnRight
)

// Item is one row of a diagram.
type Item struct {
	Kind Kind
	Dir  Dir
	// Time is when it happened; Frame its frame number (0: none).
	Time  time.Time
	Frame int
	// Label is the text on the arrow ("READ_RESPONSE_FIRST PSN 12").
	Label string
	// Fold is the key of foldable items: consecutive items with the same
	// non-empty Fold, Kind and Dir (and, for arrows, PSNs that follow one
	// another) are drawn as one band. PSN is the item's PSN, shown as the
	// band's range.
	Fold string
	PSN  uint32
	// Cut draws a Lost item as a whole arrow cut short of the far lane:
	// a packet the capture holds that did not arrive. Without Cut, a
	// Lost arrow stops half way: packets the capture never saw.
	Cut bool
}

// Diagram is what Write draws.
type Diagram struct {
	// Title is drawn at the top; Left and Right name the lanes.
	Title, Left, Right string
	// Items are in time order.
	Items []Item
	// MinFold is the shortest run that folds into a band; 0 means 4.
	MinFold int
}

// row is one line of the layout: an item, or a folded run of items.
type row struct {
	Item
	n       int    // items folded into this row (1: a plain item)
	lastPSN uint32 // PSN of the run's last item
	last    time.Time
	gap     time.Duration // silence before this row, when shown
}

// rows folds the diagram's items.
func (d *Diagram) rows() []row {
	minFold := d.MinFold
	if minFold == 0 {
		minFold = 4
	}
	var out []row
	for i := 0; i < len(d.Items); {
		it := d.Items[i]
		j := i + 1
		if it.Fold != "" {
			for j < len(d.Items) && d.Items[j].Fold == it.Fold && d.Items[j].Kind == it.Kind && d.Items[j].Dir == it.Dir &&
				(onLane(it.Dir) || packet.PSN(d.Items[j].PSN) == packet.PSN(d.Items[j-1].PSN).Next()) {
				j++
			}
		}
		if j-i >= minFold {
			out = append(out, row{Item: it, n: j - i, lastPSN: d.Items[j-1].PSN, last: d.Items[j-1].Time})
			i = j
			continue
		}
		out = append(out, row{Item: it, n: 1, lastPSN: it.PSN, last: it.Time})
		i++
	}
	// Show a silence before a row when it is long against the diagram.
	for k := 1; k < len(out); k++ {
		if gap := out[k].Time.Sub(out[k-1].last); gap >= time.Millisecond && out[k].Kind != Timeout {
			out[k].gap = gap
		}
	}
	return out
}

// onLane is true for the directions of notes, which fold by their text;
// arrows fold only while their PSNs follow one another (IBA 9.7.1: PSNs
// are 24 bits, wrapping), since their band names the range "PSN a-b".
func onLane(d Dir) bool { return d == OnLeft || d == OnRight }

// label is the text of a row: a band says how many items it holds.
func (r *row) label() string {
	if r.n == 1 {
		return r.Label
	}
	if r.Dir == OnLeft || r.Dir == OnRight {
		return fmt.Sprintf("%s ×%d", r.Fold, r.n)
	}
	return fmt.Sprintf("%s ×%d, PSN %d-%d", r.Fold, r.n, r.PSN, r.lastPSN)
}
