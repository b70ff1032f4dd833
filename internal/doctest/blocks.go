package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Block is a fenced code block of a Markdown file.
type Block struct {
	File string // the file's path as given to Parse
	Line int    // the opening fence's line, from 1
	Lang string // the first word of the fence's info string
	Mark Mark   // the marker comment on the line before the fence
	Body string
}

// Where names the block for messages: FILE:LINE.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Mark is a block's marker comment (see the package doc).
type Mark struct {
	Kind    string   // "run", "file", "skip", "launch", or "" for none
	Capi    bool     // run by capi's tests, with libpdc installed
	New     bool     // begins a new session without a cluster
	Cluster bool     // begins a new session with a cluster
	Needs   []string // programs the block runs that not every machine has
	Name    string   // file: the file's name; launch: the launcher's
	Reason  string   // skip: why not
	Raw     string   // the comment's text, for messages
}

// shellLangs are the info strings of blocks that bash runs.
var shellLangs = []string{"sh", "bash", "shell"}

// IsShell reports whether the block is a shell block.
func (b Block) IsShell() bool { return slices.Contains(shellLangs, b.Lang) }

// needsMark reports whether the block must carry a marker.
func (b Block) needsMark() bool { return b.IsShell() || b.Lang == "go" || b.Lang == "c" }

var (
	fenceRe  = regexp.MustCompile("^(```+|~~~+)[ \t]*([^\\s`]*)")
	markerRe = regexp.MustCompile(`^<!--\s*(pdc:[a-z]+|launch:)\s*(.*?)\s*-->\s*$`)
)

// Parse returns the fenced blocks of a Markdown file's text, each with the
// marker on the line before it (a malformed marker is an error).
func Parse(file string, text []byte) ([]Block, error) {
	lines := strings.SplitAfter(string(text), "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := Block{File: file, Line: i + 1, Lang: m[2]}
		if i > 0 {
			mark, err := parseMark(strings.TrimSpace(lines[i-1]))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.Where(), err)
			}
			b.Mark = mark
		}
		fence := m[1]
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimRight(lines[i], "\n")
			if strings.HasPrefix(l, fence) && strings.Trim(l, fence[:1]+" \t") == "" {
				closed = true
				break
			}
			body.WriteString(lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("%s: the block is never closed", b.Where())
		}
		b.Body = body.String()
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func parseMark(line string) (Mark, error) {
	m := markerRe.FindStringSubmatch(line)
	if m == nil {
		if strings.HasPrefix(line, "<!--") && strings.Contains(line, "pdc:") {
			return Mark{}, fmt.Errorf("malformed marker %q: want <!-- pdc:run|file|skip ... -->", line)
		}
		return Mark{}, nil
	}
	mark := Mark{Raw: line}
	words := strings.Fields(m[2])
	switch m[1] {
	case "launch:":
		mark.Kind = "launch"
		if len(words) != 1 {
			return mark, fmt.Errorf("marker %q: want <!-- launch: NAME -->", line)
		}
		mark.Name = words[0]
	case "pdc:skip":
		mark.Kind = "skip"
		mark.Reason = m[2]
		if mark.Reason == "" {
			return mark, fmt.Errorf("marker %q: pdc:skip needs a reason", line)
		}
	case "pdc:run", "pdc:file":
		mark.Kind = strings.TrimPrefix(m[1], "pdc:")
		for _, w := range words {
			switch {
			case w == "capi":
				mark.Capi = true
			case w == "new":
				mark.New = true
			case w == "cluster":
				mark.Cluster = true
			case strings.HasPrefix(w, "needs="):
				mark.Needs = append(mark.Needs, strings.Split(strings.TrimPrefix(w, "needs="), ",")...)
			case mark.Kind == "file" && mark.Name == "":
				if filepath.IsAbs(w) || filepath.Clean(w) != w || strings.HasPrefix(w, "..") {
					return mark, fmt.Errorf("marker %q: the file name must be relative and clean", line)
				}
				mark.Name = w
			default:
				return mark, fmt.Errorf("marker %q: unknown word %q", line, w)
			}
		}
		if mark.New && mark.Cluster {
			return mark, fmt.Errorf("marker %q: new or cluster, not both", line)
		}
		if mark.Kind == "file" && mark.Name == "" {
			return mark, fmt.Errorf("marker %q: pdc:file needs a file name", line)
		}
	default:
		return mark, fmt.Errorf("unknown marker %q", line)
	}
	return mark, nil
}

// Check returns an error for each block that must carry a marker and
// does not, or carries one its language cannot have.
func Check(blocks []Block) []error {
	var errs []error
	for _, b := range blocks {
		switch {
		case !b.needsMark():
		case b.Mark.Kind == "":
			errs = append(errs, fmt.Errorf("%s: a %s block without a marker: mark it <!-- pdc:run -->, or <!-- pdc:skip REASON --> saying why it cannot run (internal/doctest)", b.Where(), b.Lang))
		case b.Mark.Kind == "run" && b.Lang == "c":
			errs = append(errs, fmt.Errorf("%s: a C block is not run itself: mark it <!-- pdc:file capi NAME.c --> and build it in a shell block", b.Where()))
		case b.Mark.Kind == "run" && b.Lang == "go" && b.Mark.Capi:
			errs = append(errs, fmt.Errorf("%s: a Go block runs without libpdc: drop capi", b.Where()))
		case b.Mark.Kind == "launch" && !b.IsShell():
			errs = append(errs, fmt.Errorf("%s: only shell blocks run under a launcher", b.Where()))
		}
	}
	return errs
}

// Files returns README.md and docs/*.md under the module root, as paths
// relative to it.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}

// Load parses every file Files names.
func Load(root string) ([]Block, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		blocks, err := Parse(f, text)
		if err != nil {
			return nil, err
		}
		all = append(all, blocks...)
	}
	return all, nil
}

// ModuleRoot is the directory of the go.mod above dir.
func ModuleRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = up
	}
}
