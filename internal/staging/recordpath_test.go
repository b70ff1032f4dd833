package staging

import (
	"errors"
	"testing"

	"github.com/pdcgo/pdc"
)

// A prefix given as the user sees the file (absolute, or ./ in front)
// selects the records of those files, and one naming a whole dir is
// refused rather than taken for every record.
func TestRecordPrefix(t *testing.T) {
	const cons, prod = "/cons", "/prod/"
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"run1/", "run1/"},
		{"run1/a", "run1/a"},
		{"./run1/", "run1/"},
		{".//run1", "run1"},
		{"/prod/run1/", "run1/"},
		{"/prod/run1/a", "run1/a"},
		{"/cons/run1", "run1"},
	} {
		got, err := RecordPrefix(tc.in, cons, prod)
		if err != nil || got != tc.want {
			t.Errorf("RecordPrefix(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"/prod", "/prod/", "/cons/", "./", "/elsewhere/run1/", "/production/x"} {
		if got, err := RecordPrefix(in, cons, prod); !errors.Is(err, pdc.ErrInvalid) {
			t.Errorf("RecordPrefix(%q) = %q, %v; want an error wrapping ErrInvalid", in, got, err)
		}
	}
}
