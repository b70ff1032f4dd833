package client

import (
	"github.com/pdcgo/pdc/internal/dataquery"
	"github.com/pdcgo/pdc/internal/tagindex"
	"github.com/pdcgo/pdc/region"
)

// MaxPredicateNodes bounds the comparisons, ANDs and ORs of one data query
// (a Predicate); servers refuse a larger one.
const MaxPredicateNodes = dataquery.MaxNodes

// TagValueText is how a tag query writes a tag value of type t given as
// its stored bytes: integers of 1, 2, 4 or 8 bytes and floats of 4 or 8
// bytes as numbers (numeric true), every other value as its text without
// a C string's trailing NULs. "name=" + text matches the tags equal to it.
func TagValueText(t region.Type, v []byte) (text string, numeric bool) {
	tv := tagindex.ValueOf(t, v)
	if tv.Num != nil {
		return tv.Num.String(), true
	}
	return tv.Text, false
}
