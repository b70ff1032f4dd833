/*
 * pdc_region.h - the types of regions (boxes of an object) and of region
 * transfers.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_REGION_H
#define PDC_REGION_H

#include "pdc_public.h"
#include "pdc_obj.h"

/* Which way a region transfer moves data. */
typedef enum {
    PDC_NA    = 0,
    PDC_READ  = 1, /* object to buffer */
    PDC_WRITE = 2  /* buffer to object */
} pdc_access_t;

typedef enum {
    PDC_TRANSFER_STATUS_COMPLETE  = 0,
    PDC_TRANSFER_STATUS_PENDING   = 1,
    PDC_TRANSFER_STATUS_NOT_FOUND = 2
} pdc_transfer_status_t;

struct pdc_region_info {
    pdcid_t   local_id;
    void     *obj;
    size_t    ndim;
    uint64_t *offset;
    uint64_t *size;
    bool      mapping;
    int       registered_op;
    void     *buf;
    size_t    unit;
};

#ifdef __cplusplus
extern "C" {
#endif

/*
 * PDCregion_create makes a region: size[i] elements from offset[i] in
 * each of ndims dims (1 to 32, no size 0). It belongs to no connection;
 * close it with PDCregion_close (transfers keep their own copy, so that
 * may be right after PDCregion_transfer_create). PDCregion_get_info
 * returns it in one malloc'd block (offset and size inside it): free(info)
 * frees all; obj and buf are NULL.
 */
pdcid_t PDCregion_create(psize_t ndims, uint64_t *offset, uint64_t *size);
perr_t PDCregion_close(pdcid_t region_id);
struct pdc_region_info *PDCregion_get_info(pdcid_t reg_id);

/*
 * PDCregion_transfer_create describes moving elements between buf and the
 * object. local_reg is the part of buf, like HDF5's memory space: buf is
 * shaped as local_reg's end (offset + size) in every dim, so a 1-D local
 * region is size[0] contiguous elements from element offset[0] of buf.
 * remote_reg is the part of the object (the file space) and must lie
 * inside its dims, with as many dims. Both hold the same number of
 * elements, matched in row-major order; an element is as large as the
 * object's type.
 *
 * libpdc reads (PDC_WRITE) or writes (PDC_READ) buf from
 * PDCregion_transfer_start until PDCregion_transfer_wait, _wait_all,
 * _close or PDCobj_close returns: buf must stay valid and, for a write,
 * unchanged until then. libpdc keeps no reference to it after.
 *
 * _start starts one transfer, _start_all several together (one request
 * per data server); _start_all and _wait_all take 1 to 2^24 transfers
 * (size is checked before the array is read). With PDC_CONSISTENCY_POSIX a transfer is done when
 * start returns. _wait and _wait_all return once the transfers are done
 * (read data in buf). _status sets *completed to PDC_TRANSFER_STATUS_
 * PENDING while under way, COMPLETE once when done, then NOT_FOUND (also
 * before start). _close waits for a transfer started and not waited, and
 * releases it. _start returns once the transfer is queued: a failure on
 * its way (a data server down) is reported by _wait, _status or _close. A
 * _close that runs out of time ($PDC_TIMEOUT) on a transfer already sent
 * returns FAIL and keeps the transfer: buf is still in use until a later
 * _close succeeds.
 */
pdcid_t PDCregion_transfer_create(void *buf, pdc_access_t access_type, pdcid_t obj_id, pdcid_t local_reg,
                                  pdcid_t remote_reg);
perr_t PDCregion_transfer_start(pdcid_t transfer_request_id);
perr_t PDCregion_transfer_start_all(pdcid_t *transfer_request_id, int size);
perr_t PDCregion_transfer_wait(pdcid_t transfer_request_id);
perr_t PDCregion_transfer_wait_all(pdcid_t *transfer_request_id, int size);
perr_t PDCregion_transfer_status(pdcid_t transfer_request_id, pdc_transfer_status_t *completed);
perr_t PDCregion_transfer_close(pdcid_t transfer_request_id);

/*
 * pdc_region_transfer_now (pdc's own) moves elements between buf and the
 * object's region (offset, size; ndim dims) and returns once they are
 * there: PDCregion_transfer_create with buf shaped as size, then _start,
 * _wait and _close, in one call and one request per data server. For a
 * program that waits for each transfer as soon as it starts it, this
 * saves the four calls, the two regions and a round trip. buf is used
 * only until it returns, even when it fails.
 */
perr_t pdc_region_transfer_now(pdcid_t obj_id, void *buf, pdc_access_t access_type, psize_t ndim,
                               const uint64_t *offset, const uint64_t *size);

/*
 * PDCregion_free frees region->offset and region->size (not region), as
 * PDC's. PDC_region_overlap_detect returns 1 if the boxes (offset1,
 * size1) and (offset2, size2) of ndim dims overlap, with the overlap in
 * *output_offset and *output_size (malloc'd; the caller frees them), else
 * 0 with both NULL; -1 if ndim is not positive or a pointer is NULL.
 */
void PDCregion_free(struct pdc_region_info *region);
int  PDC_region_overlap_detect(int ndim, uint64_t *offset1, uint64_t *size1, uint64_t *offset2, uint64_t *size2,
                               uint64_t **output_offset, uint64_t **output_size);

/*
 * PDC's older I/O path, which PDC itself replaced with region transfers,
 * done here with them. PDCbuf_obj_map records that buf's part local_reg
 * (shaped as PDCregion_transfer_create's local region) goes with the
 * object's part remote_reg: both hold as many elements, local_type is as
 * large as the object's type, remote_reg lies inside the object; a part
 * is mapped once until PDCbuf_obj_unmap. PDCreg_obtain_lock takes a
 * PDC_READ or PDC_WRITE lock on the part (one at a time; the lock is the
 * process's own, no server keeps it, and PDC_BLOCK never waits).
 * PDCreg_release_lock, with the access obtained, moves the data of a
 * mapped part: a write lock writes buf's part to the object, a read lock
 * reads the object's part into buf, and it returns once the data is
 * there (written data acknowledged by the data servers); a lock on a part
 * not mapped moves nothing. buf must be valid at each release until
 * PDCbuf_obj_unmap; libpdc uses it only inside release. A failed release
 * keeps the lock, to be tried again.
 * Each fails, naming object and region, on a part not mapped (unmap), not
 * locked (release), or mapped or locked already (map, obtain).
 */
perr_t PDCbuf_obj_map(void *buf, pdc_var_type_t local_type, pdcid_t local_reg, pdcid_t remote_obj,
                      pdcid_t remote_reg);
perr_t PDCbuf_obj_unmap(pdcid_t remote_obj_id, pdcid_t remote_reg_id);
perr_t PDCreg_obtain_lock(pdcid_t obj_id, pdcid_t reg_id, pdc_access_t access_type, pdc_lock_mode_t lock_mode);
perr_t PDCreg_release_lock(pdcid_t obj_id, pdcid_t reg_id, pdc_access_t access_type);

#ifdef __cplusplus
}
#endif

#endif /* PDC_REGION_H */
