// Package bench measures pdc against the ceilings of the machine it runs on.
// Every figure is printed next to a ceiling measured in the same run (raw
// socket round trips and throughput, memcpy) and as a ratio to it, so that a
// busy neighbour, which slows both alike, does not hide a regression.
//
// A ratio of 1.0 means as fast as the ceiling; lower is slower. For
// latencies it is ceiling time / our time, for rates our rate / ceiling rate.
package bench
