package doctest

import (
	"slices"
	"strings"
	"testing"
)

const sample = "# Title\n" +
	"\n" +
	"<!-- pdc:run cluster -->\n" +
	"```sh\n" +
	"./pdc ping\n" +
	"```\n" +
	"\n" +
	"<!-- pdc:file capi new prog.c -->\n" +
	"```c\n" +
	"int main(void) { return 0; }\n" +
	"```\n" +
	"<!-- pdc:run capi needs=mpiexec,srun -->\n" +
	"```bash\n" +
	"mpiexec -n 2 true\n" +
	"```\n" +
	"<!-- pdc:skip needs two nodes -->\n" +
	"````sh\n" +
	"```\n" +
	"````\n" +
	"<!-- launch: slurm -->\n" +
	"```sh\n" +
	"srun true\n" +
	"```\n" +
	"```python\n" +
	"print(1)\n" +
	"```\n" +
	"```sh\n" +
	"unmarked\n" +
	"```\n" +
	"```go\n" +
	"package main\n" +
	"```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("doc.md", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		line       int
		lang, kind string
		body       string
	}
	wants := []want{
		{4, "sh", "run", "./pdc ping\n"},
		{9, "c", "file", "int main(void) { return 0; }\n"},
		{13, "bash", "run", "mpiexec -n 2 true\n"},
		{17, "sh", "skip", "```\n"},
		{21, "sh", "launch", "srun true\n"},
		{24, "python", "", "print(1)\n"},
		{27, "sh", "", "unmarked\n"},
		{30, "go", "", "package main\n"},
	}
	if len(blocks) != len(wants) {
		t.Fatalf("got %d blocks, want %d: %+v", len(blocks), len(wants), blocks)
	}
	for i, w := range wants {
		b := blocks[i]
		if b.Line != w.line || b.Lang != w.lang || b.Mark.Kind != w.kind || b.Body != w.body {
			t.Errorf("block %d: got line %d lang %q kind %q body %q; want %+v", i, b.Line, b.Lang, b.Mark.Kind, b.Body, w)
		}
	}
	if m := blocks[0].Mark; !m.Cluster || m.New || m.Capi {
		t.Errorf("pdc:run cluster: got %+v", m)
	}
	if m := blocks[1].Mark; !m.Capi || !m.New || m.Name != "prog.c" {
		t.Errorf("pdc:file capi new prog.c: got %+v", m)
	}
	if m := blocks[2].Mark; !slices.Equal(m.Needs, []string{"mpiexec", "srun"}) {
		t.Errorf("needs=mpiexec,srun: got %+v", m)
	}
	if m := blocks[3].Mark; m.Reason != "needs two nodes" {
		t.Errorf("pdc:skip: got reason %q", m.Reason)
	}
	if m := blocks[4].Mark; m.Name != "slurm" {
		t.Errorf("launch: got %+v", m)
	}

	errs := Check(blocks)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "doc.md:27: a sh block without a marker") ||
		!strings.Contains(errs[1].Error(), "doc.md:30: a go block without a marker") {
		t.Errorf("Check: got %v; want the unmarked sh and go blocks", errs)
	}

	sessions := Sessions(blocks)
	if len(sessions) != 2 || len(sessions[0].Blocks) != 1 || sessions[0].Capi ||
		len(sessions[1].Blocks) != 2 || !sessions[1].Capi {
		t.Errorf("Sessions: got %+v; want the cluster block alone, then the capi file and run", sessions)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, text := range []string{
		"<!-- pdc:skip -->\n```sh\nx\n```\n",              // no reason
		"<!-- pdc:run fast -->\n```sh\nx\n```\n",          // unknown word
		"<!-- pdc:run new cluster -->\n```sh\nx\n```\n",   // both
		"<!-- pdc:file -->\n```c\nx\n```\n",               // no name
		"<!-- pdc:file ../x.c -->\n```c\nx\n```\n",        // leaves the dir
		"<!-- pdc:runn -->\n```sh\nx\n```\n",              // unknown marker
		"<!-- pdc: run -->\n```sh\nx\n```\n",              // malformed
		"<!-- pdc:run -->\n```sh\nnever closed\n",         // no closing fence
		"<!-- launch: mpiexec slurm -->\n```sh\nx\n```\n", // two names
	} {
		if _, err := Parse("doc.md", []byte(text)); err == nil {
			t.Errorf("Parse(%q) took it", text)
		}
	}
	for _, text := range []string{
		"<!-- pdc:run -->\n```c\nx\n```\n",       // C is built by a shell block
		"<!-- pdc:run capi -->\n```go\nx\n```\n", // Go runs without libpdc
	} {
		blocks, err := Parse("doc.md", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if errs := Check(blocks); len(errs) != 1 {
			t.Errorf("Check(%q): got %v, want one error", text, errs)
		}
	}
}
