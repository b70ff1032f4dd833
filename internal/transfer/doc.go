// Package transfer is the client's region-transfer engine: it moves
// regions between a program's buffers and the data servers, for package
// client, whose Transfer, Access and TransferStatus are this package's
// types.
//
// A transfer goes through these steps:
//
//   - New describes it and checks it against its object's dims.
//   - Start queues it for the placer (placepipe.go), a goroutine that
//     takes the queued transfers in Start order, asks the metadata
//     server where a region-dynamic or region-local write goes (or where
//     a read's pieces are), a run of them in one request, and starts
//     each run; StartAll and POSIX transfers start at once (startNow).
//   - plan splits it into parts per data server, by the object's
//     partition (package placement), and lays out their bytes.
//   - A start sends the parts to each data server as one request, and
//     returns before the answer (startpipe.go): at most a window of
//     starts per server is unanswered, and a read waits for the writes
//     started before it on that server.
//   - Wait (WaitAll) collects the starts' answers, asks each data server
//     for its parts, and puts a read's bytes in place.
//
// Payloads to a data server on this host may travel through a
// shared-memory lane (lane.go) instead of the connection.
//
// The engine asks of the cluster only what Cluster says: the data
// servers, calls and connections by rank, and names and addresses for
// errors and lanes. It knows an object only as an Object: its Meta, as
// the client last looked it up, and a Source to look it up again. So its
// parts that ask no server (planning, the start window, the placer's
// queue, lane spans) are tested here without a cluster, and the rest
// against one server run in the test process.
//
// An Engine's goroutine (the placer) runs while transfers are queued; its
// owner stops it with StopPlacer and then Close, once the connections
// are closed.
package transfer
