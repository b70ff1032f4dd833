package tagindex

// Step is what one request of a query asks a metadata server to do.
type Step uint32

// Steps.
const (
	// StepScan: match every object tag the server holds (no index).
	StepScan Step = 0
	// StepKeys: the keys of the key dictionary that match the query's key
	// pattern (a suffix or infix pattern).
	StepKeys Step = 1
	// StepByKey: the objects whose tag of one of the given keys (or, with
	// no keys given, of a key the server's dictionary matches with the
	// query's exact or prefix key pattern) matches the query's value.
	StepByKey Step = 2
	// StepByValue: the objects whose text value matches the query's value
	// pattern and whose key matches its key pattern.
	StepByValue Step = 3
)

var stepNames = [...]string{"scan", "keys", "by-key", "by-value"}

func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "step?"
}

// Plan says which servers a query asks, and for what.
type Plan struct {
	// Scan: the index cannot answer the query; every server scans.
	Scan bool
	// First is the first step, asked of Servers (indexes among the
	// metadata servers, ascending), with Terms.
	First   Step
	Servers []int
	Terms   []string
	// Then: First is StepKeys, and the keys it finds are then asked with
	// StepByKey of the servers that own them.
	Then bool
}

// Plan decides how to answer q with the index. Exact and prefix values are
// looked up where their text lives unless the key is exact, suffix values
// through the suffix tree (or the reversed texts without suffix-tree
// mode) and infix values through the suffix tree; otherwise the key
// decides: an exact key at its server, a prefix in the dictionary of the
// servers of the prefix, a suffix or infix in the reversed or suffix tree
// and then at the servers of the keys found. Queries the index cannot
// narrow (any key with no text value, infix without suffix-tree mode)
// scan. Numbers are looked up by key only: a numeric literal also matches
// numeric tags, which have no text entries.
func (p *Partition) Plan(q *Query, suffixMode bool) Plan {
	v := q.Value
	textOnly := !q.Range && (v.Kind != Exact || q.Eq == nil)
	valueSide := textOnly && (v.Kind == Suffix || (v.Kind == Infix && suffixMode) ||
		((v.Kind == Exact || v.Kind == Prefix) && q.Key.Kind != Exact))
	if valueSide {
		switch v.Kind {
		case Exact:
			return Plan{First: StepByValue, Servers: []int{p.Owner(v.Lit)}}
		case Prefix:
			return Plan{First: StepByValue, Servers: p.run(v.Lit)}
		case Suffix:
			if !suffixMode {
				return Plan{First: StepByValue, Servers: p.run(reverse(v.Lit))}
			}
			// The literal as a whole suffix (W) or text (V), where it
			// lives; server 0 also holds the texts too long for W.
			s := p.run(v.Lit)
			if s[0] != 0 {
				s = append([]int{0}, s...)
			}
			return Plan{First: StepByValue, Servers: s}
		case Infix:
			// Server 0 also holds the texts too long for the suffix tree.
			s := p.run(v.Lit)
			if s[0] != 0 {
				s = append([]int{0}, s...)
			}
			return Plan{First: StepByValue, Servers: s}
		}
	}
	k := q.Key
	switch {
	case k.Kind == Exact:
		return Plan{First: StepByKey, Servers: []int{p.Owner(k.Lit)}, Terms: []string{k.Lit}}
	case k.Kind == Prefix:
		return Plan{First: StepByKey, Servers: p.run(k.Lit)}
	case k.Kind == Suffix:
		return Plan{First: StepKeys, Servers: p.run(reverse(k.Lit)), Then: true}
	case k.Kind == Infix && suffixMode:
		return Plan{First: StepKeys, Servers: p.run(k.Lit), Then: true}
	}
	return Plan{Scan: true}
}

func (p *Partition) run(prefix string) []int {
	first, last := p.PrefixOwners(prefix)
	s := make([]int, 0, last-first+1)
	for i := first; i <= last; i++ {
		s = append(s, i)
	}
	return s
}
