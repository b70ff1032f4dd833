/*
 * pdc_obj.h - the types of objects: named n-dimensional arrays in a
 * container.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_OBJ_H
#define PDC_OBJ_H

#include "pdc_public.h"
#include "pdc_prop.h"

/*
 * An object's metadata. server_id is the rank of the server that holds
 * it; metadata_server_id is the server PDC would place it on (the djb2
 * hash of its name plus its time step, modulo the number of servers), so
 * that programs written for PDC that print or check it agree with PDC.
 */
/* Region lock modes, for PDCreg_obtain_lock (pdc_region.h). */
typedef enum { PDC_BLOCK = 0, PDC_NOBLOCK = 1 } pdc_lock_mode_t;

struct pdc_obj_info {
    char                *name;
    pdcid_t              meta_id;
    pdcid_t              local_id;
    int                  server_id;
    uint32_t             metadata_server_id;
    struct pdc_obj_prop *obj_pt;
};

/* An iterator over a container's objects (opaque). */
typedef struct pdc_obj_iter obj_handle;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * PDCobj_create creates the object obj_name in the container with the
 * property's dims, type, partition, consistency and identity (time step,
 * user id, app name), and opens it. An object of the same identity fails
 * (returns 0) and creates nothing. The property must have dims and a type.
 *
 * PDCobj_open and PDCobj_open_col open the object of that name (time step
 * 0) from any process; no coordination is needed, so they are the same.
 */
pdcid_t PDCobj_create(pdcid_t cont_id, const char *obj_name, pdcid_t obj_create_prop);
pdcid_t PDCobj_open(const char *obj_name, pdcid_t pdc);
pdcid_t PDCobj_open_col(const char *obj_name, pdcid_t pdc);

/*
 * PDCobj_close waits for the object's transfers started and not waited,
 * makes what they wrote durable, and releases the handle. Its transfers
 * stay open until PDCregion_transfer_close but cannot be started again.
 * PDCobj_del deletes the object, its tags and data; the handle stays open
 * until PDCobj_close.
 */
perr_t PDCobj_close(pdcid_t obj_id);
perr_t PDCobj_del(pdcid_t obj_id);

/*
 * PDCobj_get_info returns the object's metadata as its server has it now
 * (dims set by any process are seen) in one malloc'd block: free(info)
 * frees info->name and info->obj_pt (with its dims) too; do not free them
 * separately. NULL on failure. obj_pt->obj_prop_id is 0.
 */
struct pdc_obj_info *PDCobj_get_info(pdcid_t obj);

/*
 * PDCobj_set_dims changes the object's dims (same ndim; elements inside
 * the new dims keep their values). PDCobj_get_dims sets *ndim and *dims,
 * a malloc'd array the caller frees with free(*dims).
 */
perr_t PDCobj_set_dims(pdcid_t obj_id, int ndim, uint64_t *dims);
perr_t PDCobj_get_dims(pdcid_t obj_id, int *ndim, uint64_t **dims);

/*
 * PDCobj_flush_start waits for the object's transfers under way and makes
 * what they wrote durable on the data servers; it returns when that is
 * done. PDCobj_flush_all_start does so for every open object.
 */
perr_t PDCobj_flush_start(pdcid_t obj_id);
perr_t PDCobj_flush_all_start(void);

/*
 * PDCobj_buf_retrieve returns the address of a slot holding the buffer
 * PDCprop_set_obj_buf gave the object's property (NULL in the slot if
 * none; objects opened, not created, have none). The slot is this
 * thread's and is overwritten by its next call. NULL on failure.
 */
void **PDCobj_buf_retrieve(pdcid_t obj_id);

/*
 * PDCobj_put_data creates a 1-D object of size bytes (PDC_CHAR) named
 * obj_name in the container, writes data to it and returns its open
 * handle; if the write fails nothing is left behind. PDCobj_get_data reads
 * the first size bytes of the object (a whole number of elements) into
 * data; an object of more than one dim is read whole (size must be its
 * size in bytes).
 */
pdcid_t PDCobj_put_data(const char *obj_name, void *data, uint64_t size, pdcid_t cont_id);
perr_t PDCobj_get_data(pdcid_t obj_id, void *data, uint64_t size);

/*
 * PDCobj_put_tag, PDCobj_get_tag and PDCobj_del_tag are PDCcont_put_tag,
 * _get_tag and _del_tag (pdc_cont.h) for an object's tags: get_tag returns
 * a malloc'd copy and the type the tag was stored with; a tag not set
 * (never, or deleted) succeeds with *tag_value NULL, *value_size 0 and
 * *value_type PDC_UNKNOWN; an object deleted meanwhile fails. Tags are what
 * PDC_Client_query_kvtag searches.
 */
perr_t PDCobj_put_tag(pdcid_t obj_id, const char *tag_name, const void *tag_value, pdc_var_type_t value_type,
                      psize_t value_size);
perr_t PDCobj_get_tag(pdcid_t obj_id, const char *tag_name, void **tag_value, pdc_var_type_t *value_type,
                      psize_t *value_size);
perr_t PDCobj_del_tag(pdcid_t obj_id, const char *tag_name);

/*
 * pdc_obj_tag_names (pdc's own) lists the object's tags: *n names, sorted,
 * in *names, one malloc'd block of them each ended by a NUL (NULL when
 * there are none; the caller frees it). PDC has no way to list tags.
 */
perr_t pdc_obj_tag_names(pdcid_t obj_id, int *n, char **names);

/*
 * pdc_cont_obj_names (pdc's own) lists the container's objects: *n names,
 * in meta id order, in *names as pdc_obj_tag_names's. Unlike
 * PDCobj_iter_next, whose NULL means both "no more" and "failed", it
 * returns FAIL when the listing could not be finished.
 */
perr_t pdc_cont_obj_names(pdcid_t cont_id, int *n, char **names);

/*
 * Object iterators, as the container iterators (pdc_cont.h), over the
 * objects of cont_id (created in it or added to it) in increasing meta id
 * order: PDCobj_iter_start returns NULL for an empty container, or on
 * failure, which prints why. Like those, they fetch a page at a time, so
 * a container of millions of objects iterates in bounded memory, and they
 * are not a snapshot. PDCobj_iter_next's cont_id is not needed (the
 * iterator walks the container given to iter_start).
 * PDCobj_iter_get_info returns what PDCobj_get_info does, as the object
 * was when the iterator fetched its page (one block: free(info));
 * local_id is this process's open handle to it, 0 if none.
 */
obj_handle *PDCobj_iter_start(pdcid_t cont_id);
pbool_t PDCobj_iter_null(obj_handle *ohandle);
obj_handle *PDCobj_iter_next(obj_handle *ohandle, pdcid_t cont_id);
struct pdc_obj_info *PDCobj_iter_get_info(obj_handle *ohandle);

#ifdef __cplusplus
}
#endif

#endif /* PDC_OBJ_H */
