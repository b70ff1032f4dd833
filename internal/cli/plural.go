package cli

import "fmt"

// integer is what the command line counts with.
type integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// plural is one if n is 1, else many: "1 object", "0 objects".
func plural[N integer](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count is n and its noun, singular or plural as n asks: count(1,
// "server", "servers") is "1 server". Every count the commands print
// goes through it or plural: "added 1 objects" read as a typo.
func count[N integer](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}

// allAnswer says that all n servers of a cluster answer: "all 3 servers
// answer", and of one, "its 1 server answers" ("all 1 servers").
func allAnswer(n int) string {
	if n == 1 {
		return "its 1 server answers"
	}
	return fmt.Sprintf("all %d servers answer", n)
}

// noneAnswers says that none of n servers answers, as allAnswer.
func noneAnswers(n int) string {
	if n == 1 {
		return "its 1 server does not answer"
	}
	return fmt.Sprintf("none of its %d servers answers", n)
}
