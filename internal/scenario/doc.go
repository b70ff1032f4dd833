// Package scenario runs tests written as data: a file of cases, each a
// command, its input and the output it must give, in the style of
// etcd-raft's and pebble's testdata files. A case reads as what it
// checks, and a new one is a few lines of text, not code.
//
// A file holds cases separated by blank lines. Lines starting with "#"
// between cases are comments. A case is
//
//	command arg=value ...
//	input lines
//	----
//	expected output lines
//
// The test's function gets each case and returns its output; the case
// passes when that equals the expected lines. Run with -rewrite, a test
// writes the outputs it got into the file instead: review the diff.
package scenario
