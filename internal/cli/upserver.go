package cli

import (
	"context"
	"flag"
)

// upServerOnly are the flags of pdc server that pdc up does not take, and
// why: up sets them itself, per rank. Every other server flag is a flag
// of up too, passed to every server (addServerFlags): a flag added to
// pdc server is settable through pdc up without more code.
var upServerOnly = map[string]string{
	"rank":            "up numbers the servers 0 to -n - 1",
	"size":            "up -n N",
	"host":            "up --hosts names each rank's host",
	"startup-timeout": "up --timeout",
	"secret-file":     "up makes the cluster's secret (--secret), or uses $PDC_SECRET_FILE",
	"log-file":        "up writes rank R's log to TMPDIR/logs/server-R.log",
}

// serverFlagSet is the flag set of pdc server, read without running it.
func serverFlagSet(e *env) *flag.FlagSet {
	var got *flag.FlagSet
	sub := *e
	sub.flagSink = func(fs *flag.FlagSet) { got = fs }
	_ = runServer(context.Background(), &sub, []string{"--help"})
	return got
}

// passFlag is a server flag given to up: its value as given, passed on.
type passFlag struct {
	value  string
	typ    string // the server flag's, for help
	isBool bool
}

func (p *passFlag) String() string {
	if p == nil {
		return ""
	}
	return p.value
}
func (p *passFlag) Set(s string) error { p.value = s; return nil }
func (p *passFlag) IsBoolFlag() bool   { return p.isBool }

// addServerFlags defines on up's flag set every flag of pdc server that
// up has not defined itself (nor sets per rank: upServerOnly).
func addServerFlags(e *env, fs *flag.FlagSet) {
	serverFlagSet(e).VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*helpFlag); ok || fs.Lookup(f.Name) != nil || upServerOnly[f.Name] != "" {
			return
		}
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		typ, _ := flag.UnquoteUsage(f)
		p := &passFlag{value: f.DefValue, typ: typ, isBool: isBool && bf.IsBoolFlag()}
		fs.Var(p, f.Name, f.Usage+" (every server's, as pdc server --"+f.Name+")")
	})
}

// passedArgs are the server flags given to up (addServerFlags), as
// --name=value for every server, in name order.
func passedArgs(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if p, ok := f.Value.(*passFlag); ok {
			args = append(args, "--"+f.Name+"="+p.value)
		}
	})
	return args
}
