package retry

import "time"

// DefaultWindowMin is the smallest adaptive window when WindowConfig.Min
// is zero. Under random loss a go-back-N round trip delivers about the
// packets before its first loss, at most 1/p of them, so a window shrunk
// far below that idles the path between losses: 32 PSNs (128 KiB at a
// 4096-byte MTU) delivered 10-35 % more than 8 at 1-5 % loss on loopback
// while resending 11-21 packets per loss instead of 5-16, and far fewer
// than the fixed 128-PSN window (17-47); docs/performance.md.
const DefaultWindowMin = 32

// WindowConfig bounds an adaptive Window.
type WindowConfig struct {
	// Max is the largest window, in PSNs: the QP's fixed window (128,
	// rxe's RXE_MAX_UNACKED_PSNS). Values below 1 count as 1.
	Max int
	// Min is the smallest window the decrease goes to; 0 means
	// DefaultWindowMin. It is capped at Max.
	Min int
	// Initial is the window before any loss; 0 means Max.
	Initial int
}

// Window is the number of PSNs a go-back-N requester may have outstanding,
// adapted to loss: after a loss a go-back-N sender resends everything it
// had in flight behind the lost packet, so a smaller window resends less.
//
//   - Decrease: OnLoss halves the window (not below Min), at most once per
//     round trip: the losses of one window are one congestion event
//     (RFC 5681 3.1, RFC 6582).
//   - Increase: OnAck counts newly acknowledged PSNs. Below the threshold
//     (half-way between the window before the last decrease and the one
//     after it) every acknowledged PSN adds one (the window doubles per
//     clean round trip, RFC 5681 slow start); at or above it each full
//     window acknowledged without a loss adds an eighth of the window (at
//     least one). The window never exceeds Max. Under steady random loss
//     the window thus settles where a round trip of data rarely sees more
//     than one loss.
//
// The zero value is a window of 1 PSN; use Init or NewWindow. Window never
// allocates and is not safe for concurrent use.
type Window struct {
	cfg       WindowConfig
	cur       int
	threshold int
	acked     int       // PSNs acknowledged since the last increase above the threshold
	quietTill time.Time // no further decrease before this time
	losses    uint64    // decreases
	ignored   uint64    // losses inside the round trip of a decrease
	increases uint64
}

// WindowStats is a snapshot of a Window.
type WindowStats struct {
	Size, Threshold int
	Decreases       uint64 // OnLoss calls that shrank (or would have shrunk, at Min) the window
	Ignored         uint64 // OnLoss calls within a round trip of a decrease
	Increases       uint64 // times the window grew
}

// NewWindow returns a Window configured by cfg.
func NewWindow(cfg WindowConfig) *Window {
	w := new(Window)
	w.Init(cfg)
	return w
}

// Init (re)configures w and resets it to its initial size.
func (w *Window) Init(cfg WindowConfig) {
	cfg.Max = max(cfg.Max, 1)
	if cfg.Min <= 0 {
		cfg.Min = DefaultWindowMin
	}
	cfg.Min = min(cfg.Min, cfg.Max)
	if cfg.Initial <= 0 {
		cfg.Initial = cfg.Max
	}
	cfg.Initial = min(max(cfg.Initial, cfg.Min), cfg.Max)
	*w = Window{cfg: cfg, cur: cfg.Initial, threshold: cfg.Max}
}

// Config returns the configuration after defaults and clamping.
func (w *Window) Config() WindowConfig { return w.cfg }

// Size returns the current window, in PSNs: always within [Min, Max]
// (1 for the zero value).
func (w *Window) Size() int { return max(w.cur, 1) }

// OnLoss records a loss detected at now (the requester reports a sequence
// error NAK's go-back-N, a READ gap that goes back N, a tail-loss probe
// whose answer proves the tail lost, an IB timeout, and under selective
// repeat each resend; not a recovery timer expiry as such). Unless an earlier decrease
// happened less than rtt ago, the window halves (not below Min) and the
// threshold becomes the midpoint of the old and the new size. It reports whether the window was
// decreased.
func (w *Window) OnLoss(now time.Time, rtt time.Duration) bool {
	if now.Before(w.quietTill) {
		w.ignored++
		return false
	}
	w.losses++
	old := w.cur
	w.cur = max(w.cur/2, w.cfg.Min)
	w.threshold = (old + w.cur) / 2
	w.acked = 0
	w.quietTill = now.Add(max(rtt, 0))
	return true
}

// OnAck records n newly acknowledged PSNs (n ≤ 0 is ignored) and grows the
// window as described on Window.
func (w *Window) OnAck(n int) {
	if n <= 0 || w.cur >= w.cfg.Max {
		return
	}
	if w.cur < w.threshold {
		// The threshold is at most Max: Init sets it to Max, and OnLoss
		// to the midpoint of two sizes that are.
		w.cur = min(w.cur+n, w.threshold)
		w.increases++
		return
	}
	w.acked += n
	if w.acked >= w.cur {
		w.acked = 0
		w.cur = min(w.cur+max(w.cur/8, 1), w.cfg.Max)
		w.increases++
	}
}

// Stats returns a snapshot.
func (w *Window) Stats() WindowStats {
	return WindowStats{Size: w.Size(), Threshold: w.threshold, Decreases: w.losses,
		Ignored: w.ignored, Increases: w.increases}
}

// SetBounds changes the largest and smallest window (WindowConfig's Max
// and Min, clamped as Init clamps them) without forgetting the loss
// history: a window at its old largest size, which no loss holds back,
// moves to the new largest; any other keeps its size within the new
// bounds, and the threshold is kept within them too. The next OnAck grows
// the window toward the new largest as described on Window.
func (w *Window) SetBounds(maxSize, minSize int) {
	atMax := w.cur >= w.cfg.Max
	thresholdAtMax := w.threshold >= w.cfg.Max
	cfg := w.cfg
	cfg.Max, cfg.Min = max(maxSize, 1), minSize
	if cfg.Min <= 0 {
		cfg.Min = DefaultWindowMin
	}
	cfg.Min = min(cfg.Min, cfg.Max)
	cfg.Initial = min(max(cfg.Initial, cfg.Min), cfg.Max)
	w.cfg = cfg
	if atMax {
		w.cur = cfg.Max
	}
	w.cur = min(max(w.cur, cfg.Min), cfg.Max)
	if thresholdAtMax {
		w.threshold = cfg.Max
	}
	w.threshold = min(max(w.threshold, cfg.Min), cfg.Max)
}
