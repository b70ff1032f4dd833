package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
)

// What --json prints: one JSON object per line, a line per item of a
// listing. The field names are stable: scripts read them
// (docs/CLI.md lists them; a test decodes each). Add fields, never rename.
//
// Ids are 64-bit and most are above 2^53, which JSON readers that hold
// numbers as doubles (jq, JavaScript) round: each id also comes as a
// decimal string (id_str, container_str) that they keep exact.

// containerJSON is a line of pdc cont ls --json and cont info --json
// (which adds objects and tags).
type containerJSON struct {
	Name     string    `json:"name"`
	ID       uint64    `json:"id"`
	IDStr    string    `json:"id_str"`
	Lifetime string    `json:"lifetime"` // persistent or transient
	Server   int       `json:"server"`   // rank of its metadata server
	Created  string    `json:"created"`  // RFC 3339
	Deleting bool      `json:"deleting"` // a delete stopped half-way
	Objects  *int      `json:"objects,omitempty"`
	Tags     *[]string `json:"tags,omitempty"`
}

func newContainerJSON(ci client.ContainerInfo) containerJSON {
	return containerJSON{Name: ci.Name, ID: ci.ID, IDStr: strconv.FormatUint(ci.ID, 10), Lifetime: lifetimeName(ci.Lifetime), Server: ci.Server,
		Created: ci.Created.UTC().Format(time.RFC3339), Deleting: ci.Deleting}
}

// objectJSON is a line of pdc obj ls --json and obj info --json.
type objectJSON struct {
	Name         string `json:"name"`
	ID           uint64 `json:"id"`
	IDStr        string `json:"id_str"`
	Container    uint64 `json:"container"` // id of its home container
	ContainerStr string `json:"container_str"`
	Dims         string `json:"dims"` // as --dims takes them: 1024x1024, unlimitedx3
	Type         string `json:"type"`
	Partition    string `json:"partition"`
	Storage      string `json:"storage"`
	Consistency  uint32 `json:"consistency"`
	TimeStep     uint32 `json:"time_step"`
	UserID       uint32 `json:"user_id"`
	App          string `json:"app"`
	Server       int    `json:"server"`  // rank of its metadata server
	Created      string `json:"created"` // RFC 3339
}

func newObjectJSON(o client.ObjectInfo) objectJSON {
	return objectJSON{Name: o.Name, ID: o.ID, IDStr: strconv.FormatUint(o.ID, 10), Container: o.ContainerID,
		ContainerStr: strconv.FormatUint(o.ContainerID, 10), Dims: formatDims(o.Props.Dims), Type: o.Props.Type.String(),
		Partition: o.Props.Partition.String(), Storage: o.Props.Storage.String(), Consistency: uint32(o.Props.Consistency),
		TimeStep: o.Props.TimeStep, UserID: o.Props.UserID, App: o.Props.AppName, Server: o.Server,
		Created: o.Created.UTC().Format(time.RFC3339)}
}

// statusJSON is a line of pdc status --json: one per server.
type statusJSON struct {
	Rank  int    `json:"rank"`
	Addr  string `json:"addr"`
	Roles string `json:"roles"`
	PID   int    `json:"pid"`
	Host  string `json:"host"`
	// State is up, down (unreachable), no-answer (timed out), denied
	// (refused this client's secret) or error; Error says why if not up.
	State         string  `json:"state"`
	Error         string  `json:"error,omitempty"`
	DownSince     string  `json:"down_since,omitempty"` // RFC 3339
	UptimeSeconds float64 `json:"uptime_seconds"`
	Clients       uint64  `json:"clients"`
	Requests      uint64  `json:"requests"`
	Version       string  `json:"version,omitempty"`
	// IndexWaiting: ranks this server's tag index updates wait for.
	IndexWaiting []int `json:"index_waiting,omitempty"`
	// CutsWaiting: objects whose dims cut some data server has not
	// applied yet.
	CutsWaiting uint64 `json:"cuts_waiting,omitempty"`
	// SlotsMissing: data slots this server should hold and cannot, with
	// why.
	SlotsMissing []string `json:"slots_missing,omitempty"`
}

func newStatusJSON(s client.ServerStatus) statusJSON {
	j := statusJSON{Rank: s.Rank, Addr: s.Addr, Roles: s.Roles, PID: s.PID, Host: s.Host, State: "up",
		UptimeSeconds: s.Uptime.Seconds(), Clients: s.Clients, Requests: s.Requests, Version: s.Version,
		IndexWaiting: s.IndexWaiting, CutsWaiting: s.CutsWaiting, SlotsMissing: s.SlotsMissing}
	if s.Err != nil {
		j.Error = s.Err.Error()
		switch {
		case errors.Is(s.Err, pdc.ErrTimeout):
			j.State = "no-answer"
		case errors.Is(s.Err, pdc.ErrPermission):
			j.State = "denied"
		case errors.Is(s.Err, pdc.ErrUnavailable):
			j.State = "down"
		default:
			j.State = "error"
		}
		if !s.DownSince.IsZero() {
			j.DownSince = s.DownSince.UTC().Format(time.RFC3339)
		}
	}
	return j
}

// matchJSON is a line of pdc query --json.
type matchJSON struct {
	ID    uint64 `json:"id"`
	IDStr string `json:"id_str"`
	Name  string `json:"name"`
}

// jsonLines writes values one a line.
type jsonLines struct{ enc *json.Encoder }

func newJSONLines(w io.Writer) jsonLines { return jsonLines{json.NewEncoder(w)} }

func (j jsonLines) put(v any) error {
	if err := j.enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// jsonFlag adds --json to a command's flags.
func jsonFlag(fs interface {
	Bool(name string, value bool, usage string) *bool
}) *bool {
	return fs.Bool("json", false, "print one JSON object a line, with the field names of docs/CLI.md, instead of a table")
}
