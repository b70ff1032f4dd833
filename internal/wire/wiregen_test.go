package wire_test

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/wire/internal/gen"
)

// TestGeneratedCodeIsCurrent regenerates messages_gen.go and calls_gen.go
// from messages.wire in memory: a table edited without go generate, or a
// generated file edited by hand, fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	s := parseTable(t)
	for _, tc := range []struct {
		file string
		gen  func(*gen.Schema, string) ([]byte, error)
	}{
		{"messages_gen.go", gen.Generate},
		{"calls_gen.go", gen.GenerateCalls},
	} {
		want, err := tc.gen(s, "messages.wire")
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what messages.wire generates (first difference on line %d): run go generate ./internal/wire", tc.file, firstDiffLine(got, want))
		}
	}
}

// firstDiffLine returns the line on which got and want first differ.
func firstDiffLine(got, want []byte) int {
	line := 1
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			break
		}
		if got[i] == '\n' {
			line++
		}
	}
	return line
}

// TestGoldenCoversTable: every message of the table has a golden encoding
// (wiregolden_test.go), so none can change its bytes unnoticed.
func TestGoldenCoversTable(t *testing.T) {
	var golden []string
	for _, g := range goldenMessages() {
		golden = append(golden, g.name)
	}
	for _, name := range parseTable(t).Names() {
		if !slices.Contains(golden, name) {
			t.Errorf("message %s of messages.wire has no golden value in wiregolden_test.go", name)
		}
	}
}

func parseTable(t *testing.T) *gen.Schema {
	t.Helper()
	src, err := os.ReadFile("messages.wire")
	if err != nil {
		t.Fatal(err)
	}
	s, err := gen.Parse(src)
	if err != nil {
		t.Fatalf("messages.wire: %v", err)
	}
	return s
}
