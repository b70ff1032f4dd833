/*
 * pdc_cont.h - containers: named groups of objects.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_CONT_H
#define PDC_CONT_H

#include "pdc_public.h"
#include "pdc_prop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What PDCcont_get_info returns. */
struct pdc_cont_info {
    char    *name;
    pdcid_t  local_id; /* this process's handle to it, 0 if it has none open */
    uint64_t meta_id;  /* the container's id on the servers: the same in every process */
};

/* An iterator over containers (opaque). */
typedef struct pdc_cont_iter cont_handle;

/*
 * PDCprop_set_cont_lifetime sets the lifetime of the containers a container
 * property creates (default PDC_PERSIST).
 */
perr_t PDCprop_set_cont_lifetime(pdcid_t cont_prop, pdc_lifetime_t lifetime);

/*
 * PDCcont_create creates the container cont_name with the settings of
 * cont_prop (from PDCprop_create(PDC_CONT_CREATE, pdc)), on the connection
 * the property belongs to. If a container of that name exists, it returns
 * a handle to the existing one, as PDC does, so every rank of a job may
 * call it with the same name.
 *
 * Returns a new container handle (close it with PDCcont_close), or 0.
 */
pdcid_t PDCcont_create(const char *cont_name, pdcid_t cont_prop);

/*
 * PDCcont_create_col is PDCcont_create called by every rank of a job with
 * the same name. Creating is idempotent on the servers, so no rank needs to
 * wait for another: every rank gets a handle to the one container.
 */
pdcid_t PDCcont_create_col(const char *cont_name, pdcid_t cont_prop);

/*
 * PDCcont_open opens the existing container cont_name on the connection
 * pdc. A container that does not exist fails (returns 0).
 *
 * Returns a new container handle (close it with PDCcont_close), or 0.
 */
pdcid_t PDCcont_open(const char *cont_name, pdcid_t pdc);

/* PDCcont_open_col is PDCcont_open called by every rank of a job. */
pdcid_t PDCcont_open_col(const char *cont_name, pdcid_t pdc);

/*
 * PDCcont_get_id returns the handle this process already has open to the
 * container cont_name on the connection pdc (the oldest, if several), or
 * opens one if it has none. Either way the caller owes one PDCcont_close
 * for it: a handle returned by get_id stays open until every open, create
 * and get_id that returned it has been matched by a close.
 *
 * Returns the handle, or 0.
 */
pdcid_t PDCcont_get_id(const char *cont_name, pdcid_t pdc);

/*
 * PDCcont_get_info describes the container cont_name: from this process's
 * open handle to it if there is one, else from the servers (through the
 * oldest open connection; local_id is then 0).
 *
 * Returns a struct allocated with malloc, whose name is allocated with
 * malloc too; both are the caller's to free:
 *     free(info->name); free(info);
 * Returns NULL on failure.
 */
struct pdc_cont_info *PDCcont_get_info(const char *cont_name);

/*
 * PDCcont_persist makes a transient container persistent: it then outlives
 * the cluster.
 */
perr_t PDCcont_persist(pdcid_t cont);

/*
 * PDCcont_del deletes the container and every object created in it, on the
 * servers. Objects added to it from other containers (PDCcont_put_objids)
 * are not deleted: they only stop being its members. It fails, deleting
 * nothing, while any object created in it is open in any process. The
 * handle stays open: close it with PDCcont_close.
 *
 * It deletes a page of objects at a time, each whole (data, then metadata
 * with tags and index entries), so a container of millions deletes in
 * bounded memory. If it fails half-way (a server dies, the call times
 * out), the container can no longer be opened or created: PDCcont_del of
 * the handle again, or `pdc cont rm`, finishes the delete.
 */
perr_t PDCcont_del(pdcid_t cont);

/*
 * Membership by reference. An object's home is the container it was
 * created in; it may also be a member of any number of other containers.
 * Members of both kinds are listed by PDCcont_get_objids and
 * PDCobj_iter_start, and opened by pdc_obj_open_by_meta_id with the
 * container. Deleting an object (PDCobj_del) removes it from every
 * container; deleting a container leaves the objects added to it.
 * Memberships are stored as durably as every other metadata change.
 *
 * PDCcont_put_objids adds the nobj objects whose handles (from
 * PDCobj_create, PDCobj_open, ...) are in obj_ids to the container.
 * Adding a member again, or an object to its home, is not an error.
 *
 * PDCcont_del_objids removes such memberships. An object cannot be removed
 * from its home container (delete the object instead), nor from one it is
 * not a member of: either fails the call.
 *
 * Both check every handle and object before changing anything: a call that
 * fails on a bad argument (a handle that is not an open object or
 * container, nobj < 0, obj_ids NULL with nobj > 0, an object deleted
 * meanwhile) changes nothing. nobj 0 does nothing and succeeds. obj_ids is
 * not kept after the call.
 *
 * PDCcont_get_objids sets *obj_ids to a malloc'd array (the caller frees
 * it) of the ids on the servers of every member of the container, created
 * in it or added to it, in increasing order, and *nobj to their number
 * (the call holds the ids only, 8 bytes each, for containers of millions of
 * objects; more than INT_MAX fails). These
 * are meta ids, as struct pdc_obj_info's meta_id, the same in every process,
 * not handles: open one with pdc_obj_open_by_meta_id(cont, id, 0). An
 * empty container succeeds with *nobj 0 and *obj_ids NULL.
 */
perr_t PDCcont_put_objids(pdcid_t cont_id, int nobj, pdcid_t *obj_ids);
perr_t PDCcont_get_objids(pdcid_t cont_id, int *nobj, pdcid_t **obj_ids);
perr_t PDCcont_del_objids(pdcid_t cont_id, int nobj, pdcid_t *obj_ids);

/*
 * PDCcont_put_tag sets the tag tag_name of the container to value_size
 * bytes at tag_value, of type value_type (a PDC_STRING tag holds the bytes
 * given: pass strlen + 1 to keep the NUL). Setting it again replaces it.
 * Values are at most 64 KiB; names at most 256 bytes.
 */
perr_t PDCcont_put_tag(pdcid_t cont, const char *tag_name, const void *tag_value, pdc_var_type_t value_type,
                       psize_t value_size);

/*
 * PDCcont_get_tag returns the tag tag_name of the container: *tag_value is
 * a copy allocated with malloc (the caller frees it), *value_size its size
 * and *value_type the type it was stored with (value_type may be NULL).
 * A tag that is not set (never, or deleted) succeeds with *tag_value NULL,
 * *value_size 0 and *value_type PDC_UNKNOWN; a container that does not
 * exist fails.
 */
perr_t PDCcont_get_tag(pdcid_t cont, const char *tag_name, void **tag_value, pdc_var_type_t *value_type,
                       psize_t *value_size);

/*
 * PDCcont_del_tag deletes the tag tag_name of the container. Deleting a
 * tag that is not set fails, saying so.
 */
perr_t PDCcont_del_tag(pdcid_t cont, const char *tag_name);

/*
 * PDCcont_close releases a container handle (see PDCcont_get_id for
 * handles returned more than once). Closing a handle that is not open
 * fails.
 */
perr_t PDCcont_close(pdcid_t cont);

/*
 * Container iterators. PDCcont_iter_start returns a handle at the first of
 * the container handles this process has open (PDCcont_create, _open,
 * _get_id), newest first, one entry per handle as in PDC: two opens of one
 * container are two entries with the same meta_id. It returns NULL if
 * none is open or on failure (which prints why). (`pdc cont ls` lists the
 * cluster's containers.) PDCcont_iter_null is true for NULL: the end.
 * PDCcont_iter_next moves the handle on and returns it; past the last
 * container, or on a failure (which prints why), it frees the handle and
 * returns NULL. PDCcont_iter_get_info returns the handle's container
 * (malloc'd: free(info->name); free(info)), with local_id its handle.
 *
 *     for (cont_handle *h = PDCcont_iter_start(); !PDCcont_iter_null(h); h = PDCcont_iter_next(h)) ...
 *
 * The handles are taken when the iterator starts: a container opened
 * meanwhile is not listed. An iteration left before its end keeps its
 * list until PDCclose of that connection (the handle itself, 8 bytes, is
 * not freed). PDCcont_iter_start is declared without a parameter list, as
 * in PDC, so that programs passing it their pdc id compile; it takes none.
 */
cont_handle *PDCcont_iter_start();
pbool_t PDCcont_iter_null(cont_handle *chandle);
cont_handle *PDCcont_iter_next(cont_handle *chandle);
struct pdc_cont_info *PDCcont_iter_get_info(cont_handle *chandle);

#ifdef __cplusplus
}
#endif

#endif /* PDC_CONT_H */
