package capi

import (
	"fmt"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/region"
)

// Unimplemented reports that a function of PDC's API that pdc does not
// provide (analysis and transform registration, server-side
// histograms) was called, naming it and why, and
// returns Fail: a program that uses one links and fails clearly at run
// time instead of at link time.
func (l *Lib) Unimplemented(call, why string) int {
	return l.Report(call, fmt.Errorf("not implemented in pdc (%s): %w", why, pdc.ErrUnimplemented))
}

// ContPropLifetime is what PDCcont_prop_get_info returns: the container
// property's lifetime (PDC_PERSIST 0, PDC_TRANSIENT 1).
func (l *Lib) ContPropLifetime(id uint64) (int, int) {
	lifetime := 0
	rc := l.run(fmt.Sprintf("PDCcont_prop_get_info(%d)", id), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		h, err := l.lookupLocked(id, kindContProp)
		if err == nil {
			lifetime = int(h.lifetime)
		}
		return err
	})
	return lifetime, rc
}

// QueryText describes a query for PDCquery_print: its comparisons in
// pdc's query syntax, and the region it is restricted to (nil if none).
func (l *Lib) QueryText(id uint64) (string, *region.Box, int) {
	var text string
	var within *region.Box
	rc := l.run(fmt.Sprintf("PDCquery_print(query %d)", id), func() error {
		h, err := l.getQuery(id, "query")
		if err != nil {
			return err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		text = h.pred.String()
		if h.within != nil {
			b := h.within.Clone()
			within = &b
		}
		return nil
	})
	return text, within, rc
}
