package retry

import "time"

// Parameters of the Backoff estimator, from read_retry_delay() in the 2023
// rxe patch "RDMA-rxe: Allow retry sends for rdma read responses".
const (
	// BackoffFloor is the smallest delay Backoff ever returns.
	// read_retry_delay() keeps its delay at 1 µs or more because a zero delay would also zero
	// every later burst sample and the estimator could never climb again.
	BackoffFloor = time.Microsecond

	// BackoffStep is one "step down": how much the delay shrinks after
	// BackoffGoodRun consecutive good packets. read_retry_delay()
	// decrements its delay, kept in microseconds, by one, so one step is 1 µs.
	BackoffStep = time.Microsecond

	// BackoffWindow is the number of most recent bursts whose lengths are
	// averaged (read_retry_delay()'s 128 = 1 << 7).
	BackoffWindow = 128

	// BackoffGoodRun is the number of consecutive good packets after which
	// the delay steps down by BackoffStep (read_retry_delay()'s 512).
	BackoffGoodRun = 512

	// DefaultBackoffMax is the cap used when BackoffConfig.Max is zero.
	// The rxe patch reports the estimator settling near 50 µs on 1 GbE;
	// 1 ms leaves twenty times that head-room, and stays at or below the local ACK
	// timeout of every timeout attribute t ≥ 8 (AckTimeout(8) ≈ 1.05 ms;
	// perftest uses t = 14, 67 ms), so the responder retries its own send
	// before the requester gives up on it and re-reads (protocol.md §4.8).
	DefaultBackoffMax = time.Millisecond

	// backoffMaxLimit bounds BackoffConfig.Max so that the running sum of
	// BackoffWindow samples, each at most 2×Max, cannot overflow.
	backoffMaxLimit = time.Minute
)

// BackoffConfig configures a Backoff. The zero value selects the defaults.
type BackoffConfig struct {
	// Initial is the delay used before the first burst has been measured.
	// Zero means BackoffFloor (1 µs), read_retry_delay()'s starting point: the
	// first burst then costs a few cheap early retries, and its measured
	// length sets the delay from then on. Values are clamped to
	// [BackoffFloor, Max].
	Initial time.Duration

	// Max caps the delay, so that one pathological burst (the process was
	// descheduled, the clock jumped) cannot park a QP. Zero means
	// DefaultBackoffMax (1 ms). Values are clamped to [BackoffFloor, 1 min].
	Max time.Duration
}

// BackoffStats is a snapshot of a Backoff, for counters and traces.
type BackoffStats struct {
	Drops     uint64        // OnDrop calls: local send drops, including retries that dropped again
	Bursts    uint64        // bursts closed by a successful send (samples taken)
	Good      uint64        // OnSent calls that did not close a burst
	StepDowns uint64        // times the delay stepped down after BackoffGoodRun good packets
	GoodRun   int           // consecutive good packets since the last drop or step down
	Samples   int           // bursts in the window, at most BackoffWindow
	Mean      time.Duration // mean burst length over the window; 0 before the first burst
	Delay     time.Duration // the current delay, as Delay returns it
	InBurst   bool          // a drop is still waiting for its successful send
}

// Backoff estimates how long to wait before re-sending a packet that the
// local network stack refused (a UDP send that failed with EAGAIN/ENOBUFS, or
// a full netdev queue), so that the responder re-sends a READ response itself
// instead of leaving the loss to the requester's retransmit timeout and a
// go-back-N re-read. It is the read_retry_delay() estimator of the 2023 rxe
// patch "RDMA-rxe: Allow retry sends for rdma read responses" (protocol.md
// §4.8), made timer-driven: the caller arms a timer (a Deadline) for Delay
// instead of busy-waiting in udelay.
//
// Use: after each send attempt of the packet, call OnDrop(now) if the local
// stack refused it, then arm a Deadline at now+Delay() and try the same
// packet again when it expires; call OnSent(now) if it went out.
//
// Definitions (read_retry_delay() leaves some of these implicit):
//
//   - A burst is a maximal run of drops ended by a successful send: it opens
//     at the first OnDrop after a successful send (or after construction or
//     Reset), any further OnDrop while it is open continues it, and the next
//     OnSent closes it.
//   - The burst delay (burst length) is the wall time from the first drop of
//     the burst to the OnSent that closes it: how long the local stack needed
//     to accept packets again, timer slack included. read_retry_delay()
//     sums the delays it inserts instead; with a timer-driven retry the elapsed time
//     is the honest measure, and it also counts the time the retry spent
//     waiting for the task to run.
//   - The delay is half the mean burst delay over the last BackoffWindow
//     (128) closed bursts, recomputed each time a burst closes, as in
//     read_retry_delay() (total >> 8 over 128 bursts). Unlike
//     read_retry_delay(), which recomputes only once per 128 bursts, the window slides (a ring of 128
//     samples with a running sum), and before 128 bursts have been seen the
//     mean is over those there are, so the estimator is useful from its first
//     burst rather than after its 128th. The factor ½ keeps the estimate from
//     running away: if the stack needs R to recover, a delay D ≥ R yields a
//     burst of about D and a next delay of D/2, while D ≪ R yields a burst of
//     about R and a delay of R/2, so the delay settles between R/2 and R.
//   - A good packet is an OnSent that does not close a burst. The send that
//     closes a burst is the retry of a dropped packet and says nothing yet
//     about a healthy path; it is not counted, as in read_retry_delay().
//   - One step down: after BackoffGoodRun (512) consecutive good packets the
//     delay shrinks by BackoffStep (1 µs, read_retry_delay()'s unit), and the run
//     starts counting again. A drop ends the run. The step applies to the
//     current delay only; the window is untouched, so the next closed burst
//     recomputes the delay from the measured mean again. The decay thus
//     makes only the first retries after a quiet period optimistic.
//   - Bounds: the delay never goes below BackoffFloor (1 µs) nor above
//     BackoffConfig.Max. A single burst sample is clamped to 2×Max before it
//     enters the window (a window full of such samples gives exactly Max), so
//     one pathological burst raises the delay by at most 2×Max/128 once the
//     window is full, instead of pinning it at Max for 128 bursts.
//   - Time going backwards (a burst closed at a time before it opened)
//     counts as a burst of length 0.
//
// The zero value is ready to use with the default BackoffConfig. After
// construction no method allocates. Backoff is not safe for concurrent use;
// it belongs to the task that sends for its QP.
type Backoff struct {
	cfg   BackoffConfig // normalized
	ready bool          // cfg and delay are set up
	delay time.Duration

	samples [BackoffWindow]time.Duration // ring of burst lengths
	next    int                          // index of the slot to write next
	n       int                          // samples held, ≤ BackoffWindow
	sum     time.Duration                // sum of the n samples held

	inBurst    bool
	burstStart time.Time
	goodRun    int

	drops, bursts, good, stepDowns uint64
}

// NewBackoff returns a Backoff configured by cfg, with no history.
func NewBackoff(cfg BackoffConfig) *Backoff {
	b := new(Backoff)
	b.Init(cfg)
	return b
}

// Init (re)configures b in place and discards all history and statistics;
// use it to set up a Backoff embedded in a larger struct.
func (b *Backoff) Init(cfg BackoffConfig) {
	*b = Backoff{cfg: normalizeBackoff(cfg), ready: true}
	b.delay = b.cfg.Initial
}

// Reset discards the window, the open burst, the good run and the
// statistics, and returns the delay to its initial value; the configuration
// is kept. Call it when the QP is reset. On the zero value it is Init with
// the default configuration, which normalizing the zero b.cfg gives.
func (b *Backoff) Reset() { b.Init(b.cfg) }

// Config returns the configuration in effect, after defaults and clamping.
func (b *Backoff) Config() BackoffConfig {
	b.setup()
	return b.cfg
}

// OnDrop records that the local stack refused a packet at now. It opens a
// burst if none is open (remembering now as its start) and otherwise
// continues the open one, ends the run of good packets, and returns the
// delay to wait before trying the same packet again (the same as Delay).
func (b *Backoff) OnDrop(now time.Time) time.Duration {
	b.setup()
	b.drops++
	b.goodRun = 0
	if !b.inBurst {
		b.inBurst = true
		b.burstStart = now
	}
	return b.delay
}

// OnSent records that a packet went out at now. If a burst is open it closes
// it, adds its length (now minus the burst's first drop) to the window and
// recomputes the delay. Otherwise the packet is a good one: after
// BackoffGoodRun of them in a row the delay steps down by BackoffStep, never
// below BackoffFloor.
func (b *Backoff) OnSent(now time.Time) {
	b.setup()
	if b.inBurst {
		b.inBurst = false
		b.bursts++
		b.record(now.Sub(b.burstStart))
		return
	}
	b.good++
	b.goodRun++
	if b.goodRun >= BackoffGoodRun {
		b.goodRun = 0
		if b.delay > BackoffFloor {
			b.delay = max(b.delay-BackoffStep, BackoffFloor)
			b.stepDowns++
		}
	}
}

// Delay returns the current delay: how long to wait after a drop before
// retrying the send. It is always within [BackoffFloor, Config().Max].
func (b *Backoff) Delay() time.Duration {
	b.setup()
	return b.delay
}

// Stats returns a snapshot of the estimator's counters and state.
func (b *Backoff) Stats() BackoffStats {
	b.setup()
	s := BackoffStats{
		Drops:     b.drops,
		Bursts:    b.bursts,
		Good:      b.good,
		StepDowns: b.stepDowns,
		GoodRun:   b.goodRun,
		Samples:   b.n,
		Delay:     b.delay,
		InBurst:   b.inBurst,
	}
	if b.n > 0 {
		s.Mean = b.sum / time.Duration(b.n)
	}
	return s
}

// record adds one burst length to the window and recomputes the delay.
func (b *Backoff) record(d time.Duration) {
	d = min(max(d, 0), 2*b.cfg.Max)
	if b.n == BackoffWindow {
		b.sum -= b.samples[b.next]
	} else {
		b.n++
	}
	b.samples[b.next] = d
	b.sum += d
	b.next++
	if b.next == BackoffWindow {
		b.next = 0
	}
	// At most Max: each sample is at most 2×Max.
	b.delay = max(b.sum/time.Duration(2*b.n), BackoffFloor)
}

// setup makes the zero value behave as Init(BackoffConfig{}).
func (b *Backoff) setup() {
	if !b.ready {
		b.Init(BackoffConfig{})
	}
}

func normalizeBackoff(cfg BackoffConfig) BackoffConfig {
	if cfg.Max == 0 {
		cfg.Max = DefaultBackoffMax
	}
	cfg.Max = min(max(cfg.Max, BackoffFloor), backoffMaxLimit)
	// Zero (or less) becomes BackoffFloor.
	cfg.Initial = min(max(cfg.Initial, BackoffFloor), cfg.Max)
	return cfg
}
