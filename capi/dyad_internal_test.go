package capi

import "testing"

// DYAD's variables stand in for ours where ours are unset, and DYAD's
// transport names select ours.
func TestDyadEnvAliases(t *testing.T) {
	for _, c := range []struct {
		env                map[string]string
		producer, consumer string
		dtl                string
	}{
		{env: map[string]string{}},
		{env: map[string]string{"DYAD_PATH_PRODUCER": "/p", "DYAD_PATH_CONSUMER": "/c", "DYAD_DTL_MODE": "FLUX_RPC"},
			producer: "/p", consumer: "/c", dtl: "stream"},
		{env: map[string]string{"DYAD_DTL_MODE": "UCX"}, dtl: "pull"},
		{env: map[string]string{"DYAD_DTL_MODE": "margo"}, dtl: "pull"},
		{env: map[string]string{"DYAD_DTL_MODE": "Push"}, dtl: "push"},
		{env: map[string]string{
			"DYAD_PATH_PRODUCER": "/p", "PDC_STAGE_PRODUCER_DIR": "/ours",
			"DYAD_PATH_CONSUMER": "/c", "PDC_STAGE_CONSUMER_DIR": "/ours-c",
			"DYAD_DTL_MODE": "UCX", "PDC_DTL": "shm",
		}, producer: "/ours", consumer: "/ours-c", dtl: "shm"},
	} {
		l := New(Config{Getenv: func(k string) string { return c.env[k] }})
		p, cons := l.envOr("PDC_STAGE_PRODUCER_DIR", EnvDyadProducer), l.envOr("PDC_STAGE_CONSUMER_DIR", EnvDyadConsumer)
		if p != c.producer || cons != c.consumer {
			t.Errorf("%v: producer %q, consumer %q; want %q, %q", c.env, p, cons, c.producer, c.consumer)
		}
		if got := l.dtlMode(); got != c.dtl {
			t.Errorf("%v: transport %q, want %q", c.env, got, c.dtl)
		}
	}
}
