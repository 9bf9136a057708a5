package perftest

import (
	"fmt"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// plotData is the --plot chart of this side's results.
func (s *session) plotData() *plot.Plot {
	p := &plot.Plot{
		Title:  fmt.Sprintf("%s, MTU %d, %s", s.testTitle(), s.mtu.Bytes(), time.Now().Format("2006-01-02")),
		XLabel: "message size [bytes] (log2 scale)",
	}
	if s.t.lat {
		p.Unit = "usec"
		p.YLabel = "latency [usec]"
		typ := plot.Series{Name: "t_typical", Color: plot.Blue}
		p99 := plot.Series{Name: "99% percentile", Color: plot.Orange}
		for _, r := range s.latResults {
			p.Xs = append(p.Xs, float64(r.Size))
			typ.Ys = append(typ.Ys, r.Typical)
			p99.Ys = append(p99.Ys, r.P99)
		}
		p.Series = []plot.Series{typ, p99}
		return p
	}
	p.Unit = report.BWUnit(s.o.gbits)
	p.YLabel = "BW average [" + strings.TrimSuffix(p.Unit, "/s") + "/sec]"
	avg := plot.Series{Name: "BW average", Color: plot.Blue}
	for _, r := range s.bwResults {
		p.Xs = append(p.Xs, float64(r.Size))
		avg.Ys = append(avg.Ys, r.Avg)
	}
	p.Series = []plot.Series{avg}
	return p
}
