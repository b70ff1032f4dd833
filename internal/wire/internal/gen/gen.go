package gen

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"slices"
	"strconv"
	"strings"
)

// Schema is a parsed table.
type Schema struct {
	Items    []Item // messages and free comments, in table order
	Scalars  map[string]string
	Messages map[string]*Message
}

// Item is a message, or a comment block that stands alone.
type Item struct {
	Comment []string
	Msg     *Message
}

// Message is one message of the table.
type Message struct {
	Name    string
	Doc     []string
	Options map[string]string
	Fields  []*Field
	Line    int
}

// Field is one field of a message. Lines holds comment and blank lines
// that precede it in the struct.
type Field struct {
	Name    string
	Type    string
	Num     int
	Options map[string]bool
	Comment string
	Lines   []string
	Line    int
}

// Names returns the names of the table's messages, in table order.
func (s *Schema) Names() []string {
	var out []string
	for _, it := range s.Items {
		if it.Msg != nil {
			out = append(out, it.Msg.Name)
		}
	}
	return out
}

// Parse reads a table.
func Parse(src []byte) (*Schema, error) {
	s := &Schema{Scalars: map[string]string{}, Messages: map[string]*Message{}}
	sc := bufio.NewScanner(bytes.NewReader(src))
	var pending []string // comment lines not yet attached
	var cur *Message
	var lines []string // inside a message: lines before the next field
	n := 0
	for sc.Scan() {
		n++
		raw := strings.TrimRight(sc.Text(), " \t")
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") {
			continue // a comment on the table itself
		}
		errf := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...))
		}
		if cur != nil {
			switch {
			case line == "}":
				if len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
					lines = lines[:len(lines)-1]
				}
				if len(lines) > 0 {
					return nil, errf("comment at the end of message %s", cur.Name)
				}
				s.Items = append(s.Items, Item{Msg: cur})
				cur = nil
			case line == "" || strings.HasPrefix(line, "//"):
				lines = append(lines, line)
			default:
				fd, err := parseField(line)
				if err != nil {
					return nil, errf("%v", err)
				}
				fd.Lines, fd.Line = lines, n
				lines = nil
				cur.Fields = append(cur.Fields, fd)
			}
			continue
		}
		switch {
		case line == "":
			if len(pending) > 0 {
				s.Items = append(s.Items, Item{Comment: pending})
				pending = nil
			}
		case strings.HasPrefix(line, "//"):
			pending = append(pending, line)
		case strings.HasPrefix(line, "type "):
			f := strings.Fields(line)
			if len(f) != 3 || !isScalar(f[2]) {
				return nil, errf("want: type Name uint32|uint64|int32|int64")
			}
			if len(pending) > 0 {
				return nil, errf("doc comment on a type the table does not declare")
			}
			s.Scalars[f[1]] = f[2]
		case strings.HasPrefix(line, "message "):
			if !strings.HasSuffix(line, "{") {
				return nil, errf("want: message Name [options] {")
			}
			f := strings.Fields(strings.TrimSuffix(line, "{"))
			m := &Message{Name: f[1], Doc: pending, Options: map[string]string{}, Line: n}
			pending = nil
			for _, o := range f[2:] {
				o = strings.Trim(o, "[],")
				k, v, _ := strings.Cut(o, "=")
				switch k {
				case "unmarshal", "sizehint", "check", "slab":
				default:
					return nil, errf("unknown message option %q", k)
				}
				m.Options[k] = v
			}
			if _, dup := s.Messages[m.Name]; dup {
				return nil, errf("message %s declared twice", m.Name)
			}
			s.Messages[m.Name] = m
			cur, lines = m, nil
		default:
			return nil, errf("unexpected %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("message %s not closed", cur.Name)
	}
	if len(pending) > 0 {
		s.Items = append(s.Items, Item{Comment: pending})
	}
	return s, s.check()
}

// parseField reads "Name Type = N [opts] // comment".
func parseField(line string) (*Field, error) {
	fd := &Field{Options: map[string]bool{}}
	if i := strings.Index(line, "//"); i >= 0 {
		fd.Comment = strings.TrimSpace(line[i+2:])
		line = strings.TrimSpace(line[:i])
	}
	if i := strings.LastIndex(line, "["); i > strings.Index(line, "=") {
		if !strings.HasSuffix(line, "]") {
			return nil, fmt.Errorf("options not closed")
		}
		for _, o := range strings.Split(line[i+1:len(line)-1], ",") {
			o = strings.TrimSpace(o)
			if o != "alias" && o != "presize" {
				return nil, fmt.Errorf("unknown field option %q", o)
			}
			fd.Options[o] = true
		}
		line = strings.TrimSpace(line[:i])
	}
	decl, num, ok := strings.Cut(line, "=")
	if !ok {
		return nil, fmt.Errorf("want: Name Type = N")
	}
	f := strings.Fields(decl)
	if len(f) != 2 {
		return nil, fmt.Errorf("want: Name Type = N")
	}
	fd.Name, fd.Type = f[0], f[1]
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || v < 1 || v > 1<<29-1 || (v >= 19000 && v <= 19999) {
		return nil, fmt.Errorf("field %s: bad field number %q", fd.Name, num)
	}
	fd.Num = v
	return fd, nil
}

func isScalar(t string) bool {
	switch t {
	case "uint64", "uint32", "int64", "int32":
		return true
	}
	return false
}

// kind is how a field is encoded.
type kind int

const (
	kScalar    kind = iota // uint64, uint32, int64, int32 or a named one
	kBool                  // bool
	kString                // string
	kBytes                 // []byte
	kPacked                // []uint64
	kStrings               // []string
	kBytesList             // [][]byte
	kMsg                   // T
	kOptional              // *T
	kRepeated              // []T
)

// kindOf classifies fd, with its element (message) type and, for a
// scalar, its underlying type.
func (s *Schema) kindOf(fd *Field) (k kind, elem, under string, err error) {
	t := fd.Type
	switch t {
	case "bool":
		return kBool, "", "", nil
	case "string":
		return kString, "", "", nil
	case "[]byte":
		return kBytes, "", "", nil
	case "[]uint64":
		return kPacked, "", "", nil
	case "[]string":
		return kStrings, "", "", nil
	case "[][]byte":
		return kBytesList, "", "", nil
	}
	if isScalar(t) {
		return kScalar, "", t, nil
	}
	if u, ok := s.Scalars[t]; ok {
		return kScalar, "", u, nil
	}
	base, k := t, kMsg
	if strings.HasPrefix(t, "*") {
		base, k = t[1:], kOptional
	} else if strings.HasPrefix(t, "[]") {
		base, k = t[2:], kRepeated
	}
	if _, ok := s.Messages[base]; !ok {
		return 0, "", "", fmt.Errorf("line %d: field %s: unknown type %s", fd.Line, fd.Name, t)
	}
	return k, base, "", nil
}

func (s *Schema) check() error {
	for _, it := range s.Items {
		m := it.Msg
		if m == nil {
			continue
		}
		nums := map[int]string{}
		names := map[string]bool{}
		for _, fd := range m.Fields {
			if prev, ok := nums[fd.Num]; ok {
				return fmt.Errorf("line %d: %s: field %s reuses number %d of %s", fd.Line, m.Name, fd.Name, fd.Num, prev)
			}
			if names[fd.Name] {
				return fmt.Errorf("line %d: %s: field %s declared twice", fd.Line, m.Name, fd.Name)
			}
			nums[fd.Num], names[fd.Name] = fd.Name, true
			k, _, _, err := s.kindOf(fd)
			if err != nil {
				return err
			}
			if fd.Options["alias"] && k != kBytes {
				return fmt.Errorf("line %d: %s.%s: alias applies to []byte only", fd.Line, m.Name, fd.Name)
			}
			if fd.Options["presize"] && k != kRepeated {
				return fmt.Errorf("line %d: %s.%s: presize applies to []message only", fd.Line, m.Name, fd.Name)
			}
		}
		if !slices.IsSortedFunc(m.Fields, func(a, b *Field) int { return a.Num - b.Num }) {
			// Marshal writes in table order; keeping it the field order
			// keeps the encoding canonical.
			return fmt.Errorf("line %d: %s: fields out of number order", m.Line, m.Name)
		}
		if u := m.Options["unmarshal"]; u != "" && u != "custom" {
			return fmt.Errorf("line %d: %s: unmarshal=%s, want custom", m.Line, m.Name, u)
		}
	}
	return nil
}

// Generate writes the Go source of the table's types and codecs. src names
// the table in the header.
func Generate(s *Schema, src string) ([]byte, error) {
	var w bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	p("// Code generated by internal/wire/gen.go from %s; DO NOT EDIT.\n\n", src)
	p("package wire\n\n")
	for _, it := range s.Items {
		if it.Msg == nil {
			for _, c := range it.Comment {
				p("%s\n", c)
			}
			p("\n")
			continue
		}
		if err := s.genMessage(&w, it.Msg); err != nil {
			return nil, err
		}
	}
	out, err := format.Source(w.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated code: %w", err)
	}
	return out, nil
}

func (s *Schema) genMessage(w *bytes.Buffer, m *Message) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	for _, c := range m.Doc {
		p("%s\n", c)
	}
	p("type %s struct {\n", m.Name)
	for _, fd := range m.Fields {
		for _, l := range fd.Lines {
			p("%s\n", l)
		}
		c := strconv.Itoa(fd.Num)
		if fd.Comment != "" {
			c += ": " + fd.Comment
		}
		p("%s %s // %s\n", fd.Name, fd.Type, c)
	}
	p("}\n\n")

	// Marshal.
	p("func (m *%s) Marshal(b []byte) []byte {\n", m.Name)
	if _, ok := m.Options["sizehint"]; ok {
		p("if b == nil {\nb = make([]byte, 0, m.sizeHint())\n}\n")
	}
	for _, fd := range m.Fields {
		k, _, under, err := s.kindOf(fd)
		if err != nil {
			return err
		}
		n, x := fd.Num, "m."+fd.Name
		switch k {
		case kScalar:
			switch {
			case strings.HasPrefix(under, "int"):
				p("b = putInt(b, %d, %s)\n", n, conv("int64", fd.Type, x))
			default:
				p("b = putUint(b, %d, %s)\n", n, conv("uint64", fd.Type, x))
			}
		case kBool:
			p("b = putBool(b, %d, %s)\n", n, x)
		case kString:
			p("b = putString(b, %d, %s)\n", n, x)
		case kBytes:
			p("b = putBytes(b, %d, %s)\n", n, x)
		case kPacked:
			p("b = putPackedUints(b, %d, %s)\n", n, x)
		case kStrings:
			p("b = putStrings(b, %d, %s)\n", n, x)
		case kBytesList:
			p("b = putBytesList(b, %d, %s)\n", n, x)
		case kMsg:
			p("b = putMsg(b, %d, &%s)\n", n, x)
		case kOptional:
			p("if %s != nil {\nb = putMsg(b, %d, %s)\n}\n", x, n, x)
		case kRepeated:
			p("for i := range %s {\nb = putMsg(b, %d, &%s[i])\n}\n", x, n, x)
		}
	}
	p("return b\n}\n\n")

	if m.Options["unmarshal"] == "custom" {
		return nil
	}
	_, slab := m.Options["slab"]
	if slab {
		p("func (m *%s) Unmarshal(b []byte) error {\nreturn m.unmarshal(b, nil)\n}\n\n", m.Name)
		p("// unmarshal decodes into m, taking the packed fields' slices from slab\n// while it has room.\n")
		p("func (m *%s) unmarshal(b []byte, slab *uintSlab) error {\n", m.Name)
	} else {
		p("func (m *%s) Unmarshal(b []byte) error {\n", m.Name)
	}
	p("*m = %s{}\n", m.Name)
	p("f := fields{b: b, msg: %q}\n", m.Name)
	for _, fd := range m.Fields {
		if fd.Options["presize"] {
			_, elem, _, _ := s.kindOf(fd)
			p("if n := f.count(%d); n > 0 {\nm.%s = make([]%s, 0, n)\n}\n", fd.Num, fd.Name, elem)
		}
	}
	if len(m.Fields) > 0 {
		p("for f.next() {\nswitch f.num {\n")
		for _, fd := range m.Fields {
			k, elem, under, _ := s.kindOf(fd)
			x := "m." + fd.Name
			p("case %d:\n", fd.Num)
			switch k {
			case kScalar:
				get := "f." + under + "()"
				if fd.Type != under {
					get = fd.Type + "(" + get + ")"
				}
				p("%s = %s\n", x, get)
			case kBool:
				p("%s = f.bool()\n", x)
			case kString:
				p("%s = f.string()\n", x)
			case kBytes:
				if fd.Options["alias"] {
					p("%s = f.alias()\n", x)
				} else {
					p("%s = f.bytes()\n", x)
				}
			case kPacked:
				if slab {
					p("%s = f.packedUints(slab.take(&f, %s))\n", x, x)
				} else {
					p("%s = f.packedUints(%s)\n", x, x)
				}
			case kStrings:
				p("%s = append(%s, f.string())\n", x, x)
			case kBytesList:
				p("%s = append(%s, f.bytesOrEmpty())\n", x, x)
			case kMsg:
				p("f.sub(&%s)\n", x)
			case kOptional:
				p("%s = &%s{}\nf.sub(%s)\n", x, elem, x)
			case kRepeated:
				// Decoded in place: a local handed to sub escapes, one
				// allocation per element.
				p("%s = append(%s, %s{})\nf.sub(&%s[len(%s)-1])\n", x, x, elem, x, x)
			}
		}
		p("}\n}\n")
	}
	if _, ok := m.Options["check"]; ok {
		p("if f.err == nil {\nm.check(&f)\n}\n")
	}
	p("return f.err\n}\n\n")
	return nil
}

// conv converts x of type t to want, unless t is want.
func conv(want, t, x string) string {
	if t == want {
		return x
	}
	return want + "(" + x + ")"
}
