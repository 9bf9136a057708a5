package flows

// analyse runs an Analyzer over pkts.
func analyse(pkts []Packet, o Options) *Report {
	a := NewAnalyzer(o)
	for _, p := range pkts {
		a.Add(p)
	}
	return a.Report()
}
