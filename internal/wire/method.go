package wire

import "fmt"

// Method names an RPC. Values are part of the protocol: never renumber.
type Method uint32

// Methods. 1-15 are the connection and cluster methods every server has.
const (
	// MethodHello is sent by a server as the first frame of a connection
	// (header Hello).
	MethodHello Method = 1
	// MethodAuth is the client's answer to Hello (header Auth) and the
	// server's reply to it (header AuthOK).
	MethodAuth Method = 2
	// MethodPing echoes its payload.
	MethodPing Method = 3
	// MethodStatus returns a Status header.
	MethodStatus Method = 4
	// MethodRegister is sent by a starting server to rank 0 (header
	// ServerInfo); rank 0 answers once all servers have registered
	// (header ServerList).
	MethodRegister Method = 5
	// MethodShutdown asks a server to stop cleanly; it answers before it
	// stops accepting work.
	MethodShutdown Method = 6

	// Metadata methods (16-63), served by metadata-role servers.
	MethodContCreate     Method = 16 // ContCreate -> ContReply
	MethodContGet        Method = 17 // ContKey -> ContainerMeta
	MethodContList       Method = 18 // -> ContList (this server's)
	MethodContDelete     Method = 19 // ContKey -> (empty)
	MethodContLifetime   Method = 20 // ContCreate (name, lifetime) -> ContainerMeta
	MethodContDeleting   Method = 21 // ContKey -> ContainerMeta, marked as being deleted
	MethodContPage       Method = 22 // ContPageReq -> ContPage: a page of this server's containers
	MethodObjCreate      Method = 24 // ObjBatch (Creates) -> ObjResults
	MethodObjOpen        Method = 25 // ObjBatch (Opens) -> ObjResults: the first items, all unless the answer would pass 512 KiB
	MethodObjList        Method = 26 // IDArg (container id) -> ObjList (this server's)
	MethodObjDelete      Method = 27 // ObjKey -> (empty)
	MethodObjSetDims     Method = 28 // SetDims -> ObjectMeta
	MethodObjClose       Method = 29 // IDArg -> (empty)
	MethodObjOpenCount   Method = 30 // IDArg (container id) -> Count of its open objects here
	MethodObjDeleteCont  Method = 31 // IDArg (container id) -> Count deleted here
	MethodObjMembers     Method = 32 // Members -> MembersReply: add or remove container memberships of objects held here
	MethodObjPage        Method = 33 // ObjPageReq -> ObjPage: a page of a container's members held here
	MethodObjPurge       Method = 34 // ObjPurge -> Count: delete a page of a container's members held here
	MethodObjCloseAll    Method = 35 // (empty) -> (empty): close every object the calling client has open here (Client.Close)
	MethodTagPut         Method = 40 // TagBatch -> TagResults
	MethodTagGet         Method = 41 // TagKey -> TagValue
	MethodTagDelete      Method = 42 // TagKey -> (empty)
	MethodTagList        Method = 43 // TagKey (name ignored) -> TagNames
	MethodTagQuery       Method = 44 // TagQuery -> TagQueryResult: one step of a kvtag query on this server
	MethodIndexApply     Method = 45 // IndexOps -> (empty): change this server's part of the DART index
	MethodIndexFence     Method = 47 // (empty) -> IndexFenceReply once the index updates of every tag change acknowledged before it were delivered, or failed after it
	MethodCheckpoint     Method = 48 // -> Checkpoint
	MethodImport         Method = 49 // KVBatch -> (empty): metadata moving to its new owner
	MethodMigrated       Method = 7  // (to rank 0) -> (empty) once every server has moved its metadata
	MethodStartRound     Method = 8  // StartRound (to rank 0) -> StartRound once every server has taken the round
	MethodRegionAssign   Method = 50 // RegionBatch -> RegionPieces: where each region is written (dynamic, local); clients before RegionPlace
	MethodRegionPlace    Method = 56 // RegionBatch -> RegionLocatedAll: where the parts of each region are written, in place (dynamic, local)
	MethodRegionQuery    Method = 51 // RegionReq -> RegionPieces: which servers hold a region's parts
	MethodRegionQueryAll Method = 55 // RegionBatch -> RegionLocatedAll: RegionQuery for each region, each answered alone
	MethodStageProduce   Method = 52 // StageBatch -> StageBatch: record produced files, versions assigned
	MethodStageLookup    Method = 53 // StageKey -> StageRecord, at once (ErrNotFound if never produced)
	MethodStageWait      Method = 54 // StageKey -> StageRecord, once a version newer than After exists
	MethodStageList      Method = 57 // StageListReq -> StageList: a page of a namespace's staged files held here
	MethodStageRemove    Method = 58 // StageRemoveReq -> StageRemoved: remove a path, or a page of a prefix, held here
	MethodObjGone        Method = 60 // IDList -> GoneIDs: which of these objects held here do not exist, and which were never created (docs/design/0016)

	// Data transport methods (64-79).
	MethodFetch Method = 64 // FetchRequest -> FetchReply (stream mode: payload chunks first)

	// Data server methods (80-95).
	MethodDataStart      Method = 80 // DataStart (+ write bytes) -> DataIDs, or DataResults (+ read bytes) if Wait
	MethodDataWait       Method = 81 // DataIDs -> DataResults (+ read bytes), once all are done
	MethodDataStatus     Method = 82 // DataIDs -> DataResults (State), at once; a completed one is forgotten
	MethodDataFlush      Method = 83 // IDArg (object) -> (empty) once its data is fsynced
	MethodDataDelete     Method = 84 // IDArg (object) -> (empty) once its data is removed
	MethodDataQuery      Method = 85 // DataQuery -> DataQueryResult (+ indices, values): a value query over this server's parts
	MethodDataLane       Method = 86 // DataLaneReq -> DataLane: a shared-memory lane for this client's payloads
	MethodSlotFile       Method = 87 // SlotFile (+ bytes) -> (empty): a piece of a data slot moving here, at start
	MethodSlotCommit     Method = 88 // SlotCommit -> (empty) once the slot's files are checked and it is held here
	MethodDataDeleteObjs Method = 95 // ObjIDs -> (empty) once the data of every object named is removed
	MethodDataGone       Method = 92 // IDList -> (empty) once these deleted objects' data is removed here and refused from now on
	MethodDataScrub      Method = 93 // ScrubReq -> ScrubReport: orphaned files and blocks failing their checksums
	MethodDataCut        Method = 94 // DimsCut -> (empty) once the object's data here is cut to the dims and their version raised (docs/design/0006)
)

var methodNames = map[Method]string{
	MethodHello:    "hello",
	MethodAuth:     "auth",
	MethodPing:     "ping",
	MethodStatus:   "status",
	MethodRegister: "register",
	MethodShutdown: "shutdown",

	MethodContCreate:     "cont_create",
	MethodContGet:        "cont_get",
	MethodContList:       "cont_list",
	MethodContDelete:     "cont_delete",
	MethodContLifetime:   "cont_lifetime",
	MethodContDeleting:   "cont_deleting",
	MethodContPage:       "cont_page",
	MethodObjCreate:      "obj_create",
	MethodObjOpen:        "obj_open",
	MethodObjList:        "obj_list",
	MethodObjDelete:      "obj_delete",
	MethodObjSetDims:     "obj_set_dims",
	MethodObjClose:       "obj_close",
	MethodObjOpenCount:   "obj_open_count",
	MethodObjDeleteCont:  "obj_delete_cont",
	MethodObjMembers:     "obj_members",
	MethodObjPage:        "obj_page",
	MethodObjPurge:       "obj_purge",
	MethodObjCloseAll:    "obj_close_all",
	MethodTagPut:         "tag_put",
	MethodTagGet:         "tag_get",
	MethodTagDelete:      "tag_delete",
	MethodTagList:        "tag_list",
	MethodTagQuery:       "tag_query",
	MethodIndexApply:     "index_apply",
	MethodIndexFence:     "index_fence",
	MethodCheckpoint:     "checkpoint",
	MethodImport:         "import",
	MethodMigrated:       "migrated",
	MethodStartRound:     "start_round",
	MethodFetch:          "dtl_fetch",
	MethodRegionAssign:   "region_assign",
	MethodRegionPlace:    "region_place",
	MethodRegionQuery:    "region_query",
	MethodRegionQueryAll: "region_query_all",
	MethodStageProduce:   "stage_produce",
	MethodStageLookup:    "stage_lookup",
	MethodStageWait:      "stage_wait",
	MethodStageList:      "stage_list",
	MethodStageRemove:    "stage_remove",
	MethodObjGone:        "obj_gone",
	MethodDataStart:      "data_start",
	MethodDataWait:       "data_wait",
	MethodDataStatus:     "data_status",
	MethodDataFlush:      "data_flush",
	MethodDataDelete:     "data_delete",
	MethodDataQuery:      "data_query",
	MethodDataLane:       "data_lane",
	MethodSlotFile:       "slot_file",
	MethodSlotCommit:     "slot_commit",
	MethodDataDeleteObjs: "data_delete_objs",
	MethodDataGone:       "data_gone",
	MethodDataScrub:      "data_scrub",
	MethodDataCut:        "data_cut",
}

func (m Method) String() string {
	if s, ok := methodNames[m]; ok {
		return s
	}
	return fmt.Sprintf("method(%d)", uint32(m))
}
