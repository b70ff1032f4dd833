package tagindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pdcgo/pdc/internal/scenario"
	"github.com/pdcgo/pdc/region"
)

// The query language as data (testdata/query.txt): what each query
// parses to or why it is refused, which tags it matches, and the plan of
// the servers it asks.
func TestQueryScenarios(t *testing.T) {
	scenario.Run(t, "testdata/query.txt", func(t *testing.T, c *scenario.Case) string {
		lines := strings.Split(c.Input, "\n")
		var out []string
		switch c.Cmd {
		case "parse":
			for _, in := range lines {
				q, err := Parse(in)
				if err != nil {
					out = append(out, "error: "+err.Error())
					continue
				}
				out = append(out, fmt.Sprintf("%s key=%s value=%s", q, q.Key.Kind, q.Value.Kind))
			}
		case "match":
			// The first line is the query, each next a tag: key type value.
			q, err := Parse(lines[0])
			if err != nil {
				t.Fatalf("%s: %v", c.Pos, err)
			}
			for _, tag := range lines[1:] {
				key, typ, val := tagOf(t, c.Pos, tag)
				ok, err := q.Match(key, typ, val)
				if err != nil {
					out = append(out, fmt.Sprintf("%s: error: %v", tag, err))
				} else {
					out = append(out, fmt.Sprintf("%s: %v", tag, ok))
				}
			}
		case "plan":
			servers, err := strconv.Atoi(c.Arg("servers", "4"))
			if err != nil {
				t.Fatalf("%s: servers: %v", c.Pos, err)
			}
			suffix := c.Arg("suffix", "on") == "on"
			for _, in := range lines {
				p := For(servers).Plan(MustParse(in), suffix)
				if p.Scan {
					out = append(out, in+": scan")
					continue
				}
				out = append(out, fmt.Sprintf("%s: %s on %v terms %q then=%v", in, p.First, p.Servers, p.Terms, p.Then))
			}
		default:
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
		}
		return strings.Join(out, "\n")
	})
}

// tagOf reads "key type value": a number for the numeric types, text for
// string (string0 adds C's NUL).
func tagOf(t *testing.T, pos, s string) (string, region.Type, []byte) {
	f := strings.Fields(s)
	if len(f) != 3 {
		t.Fatalf("%s: tag %q is not: key type value", pos, s)
	}
	if f[1] == "string" || f[1] == "string0" {
		v := []byte(f[2])
		if f[1] == "string0" {
			v = append(v, 0)
		}
		return f[0], region.String, v
	}
	typ, err := region.ParseType(f[1])
	if err != nil {
		t.Fatalf("%s: %v", pos, err)
	}
	b := make([]byte, 8)
	switch {
	case typ.FloatingPoint():
		x, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		if typ == region.Float {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(x)))
		} else {
			binary.LittleEndian.PutUint64(b, math.Float64bits(x))
		}
	case strings.HasPrefix(typ.String(), "u"):
		x, err := strconv.ParseUint(f[2], 0, 64)
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		binary.LittleEndian.PutUint64(b, x)
	default:
		x, err := strconv.ParseInt(f[2], 0, 64)
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		binary.LittleEndian.PutUint64(b, uint64(x))
	}
	return f[0], typ, b[:typ.Size()]
}
