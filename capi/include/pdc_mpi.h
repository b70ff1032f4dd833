/*
 * pdc_mpi.h - the MPI side of pdc's C API. It includes mpi.h only when the
 * program is built with ENABLE_MPI defined, as PDC's does, so that programs
 * without MPI need no MPI headers.
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_MPI_H
#define PDC_MPI_H

#include "pdc_public.h"

#ifdef ENABLE_MPI
#include <mpi.h>
#endif

#include "pdc_obj.h"

#ifdef __cplusplus
extern "C" {
#endif
/*
 * pdc_obj_open_by_meta_id opens the object whose id on the servers is
 * meta_id (struct pdc_obj_info's meta_id), which must be in the container
 * cont_id, through the container's connection. obj_create_prop, if not 0,
 * is the property it was created with: PDCobj_buf_retrieve then returns
 * that property's buffer, as for the handle PDCobj_create returned. It is
 * how PDCobj_create_mpi's other ranks get their handle (no MPI needed).
 *
 * Returns a new object handle (close it with PDCobj_close), or 0.
 */
pdcid_t pdc_obj_open_by_meta_id(pdcid_t cont_id, uint64_t meta_id, pdcid_t obj_create_prop);

/*
 * pdc_obj_open_created is what PDCobj_create_mpi's other ranks call: it
 * opens the object meta_id another rank created, as
 * pdc_obj_open_by_meta_id, with cont_id naming only the connection. PDC
 * does not look at the container the other ranks pass, and programs
 * written for it pass each rank's own, so the object may be in any
 * container.
 */
pdcid_t pdc_obj_open_created(pdcid_t cont_id, uint64_t meta_id, pdcid_t obj_create_prop);
#ifdef __cplusplus
}
#endif

#ifdef ENABLE_MPI
#include <stdio.h>
#include "pdc_client_api.h"
#include <stdlib.h>

/*
 * The _mpi functions are defined here, over the plain ones, so that
 * libpdc.so needs no MPI and a program uses the MPI it is built with. Every
 * rank of comm calls them together. Rank 0 searches and broadcasts: every
 * rank gets the whole result (malloc'd, the caller frees it), or every
 * rank fails (rank 0 prints why; the others print one line pointing to it).
 */
static inline perr_t pdc_mpi_bcast_ids_(const char *call, perr_t rc, int *n_res, uint64_t **ids, MPI_Comm comm)
{
    int rank = 0, head[2] = {rc, rc == SUCCEED ? *n_res : 0};
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Bcast(head, 2, MPI_INT, 0, comm) != MPI_SUCCESS) {
        fprintf(stderr, "libpdc: %s: MPI_Bcast failed\n", call);
        return FAIL;
    }
    if (head[0] != SUCCEED) {
        if (rank != 0)
            fprintf(stderr, "libpdc: %s: rank %d: rank 0's search failed (its line says why)\n", call, rank);
        return FAIL;
    }
    if (rank != 0) {
        *n_res = head[1];
        *ids   = NULL;
        if (head[1] > 0 && (*ids = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)head[1])) == NULL) {
            fprintf(stderr, "libpdc: %s: rank %d: out of memory for %d ids\n", call, rank, head[1]);
            MPI_Abort(comm, 1); /* the broadcast below would hang the other ranks */
        }
    }
    if (head[1] > 0 && MPI_Bcast(*ids, head[1], MPI_UINT64_T, 0, comm) != MPI_SUCCESS) {
        fprintf(stderr, "libpdc: %s: MPI_Bcast of %d ids failed\n", call, head[1]);
        return FAIL;
    }
    return SUCCEED;
}

/* PDC_Client_query_kvtag_mpi is PDC_Client_query_kvtag for every rank of
 * world_comm: each gets the full result. */
static inline perr_t PDC_Client_query_kvtag_mpi(const pdc_kvtag_t *kvtag, int *n_res, uint64_t **pdc_ids,
                                                MPI_Comm world_comm)
{
    int rank = 0;
    MPI_Comm_rank(world_comm, &rank);
    perr_t rc = FAIL;
    if (rank == 0)
        rc = PDC_Client_query_kvtag(kvtag, n_res, pdc_ids);
    else if (n_res == NULL || pdc_ids == NULL)
        fprintf(stderr, "libpdc: PDC_Client_query_kvtag_mpi: rank %d: n_res and pdc_ids must not be NULL\n", rank);
    if (rank != 0 && (n_res == NULL || pdc_ids == NULL)) {
        int     n;
        uint64_t *ids = NULL;
        pdc_mpi_bcast_ids_("PDC_Client_query_kvtag_mpi", rc, &n, &ids, world_comm);
        free(ids);
        return FAIL;
    }
    return pdc_mpi_bcast_ids_("PDC_Client_query_kvtag_mpi", rc, n_res, pdc_ids, world_comm);
}

/* PDC_Client_search_obj_ref_through_dart_mpi is
 * PDC_Client_search_obj_ref_through_dart for every rank of comm: each gets
 * the full result. */
static inline perr_t PDC_Client_search_obj_ref_through_dart_mpi(dart_hash_algo_t hash_algo, char *query_string,
                                                                dart_object_ref_type_t ref_type, int *n_res,
                                                                uint64_t **out, MPI_Comm comm)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    perr_t rc = FAIL;
    if (rank == 0)
        rc = PDC_Client_search_obj_ref_through_dart(hash_algo, query_string, ref_type, n_res, out);
    else if (n_res == NULL || out == NULL)
        fprintf(stderr, "libpdc: PDC_Client_search_obj_ref_through_dart_mpi: rank %d: n_res and out must not be NULL\n",
                rank);
    if (rank != 0 && (n_res == NULL || out == NULL)) {
        int       n;
        uint64_t *ids = NULL;
        pdc_mpi_bcast_ids_("PDC_Client_search_obj_ref_through_dart_mpi", rc, &n, &ids, comm);
        free(ids);
        return FAIL;
    }
    return pdc_mpi_bcast_ids_("PDC_Client_search_obj_ref_through_dart_mpi", rc, n_res, out, comm);
}

/*
 * PDCobj_create_mpi: rank rank_id of comm creates the object (as
 * PDCobj_create) in its cont_id, then every other rank opens that object
 * (by its id, so the one just created whatever its time step, user id and
 * app name) through its own cont_id's connection, whichever container
 * that is (PDC's programs may pass each rank's own).
 * Every rank of comm calls it together with the same rank_id; each gets
 * its own handle (close it with PDCobj_close). If the create fails every
 * rank returns 0 (rank rank_id prints why; the others print one line
 * pointing to it); a rank whose open fails returns 0, printing why.
 */
static inline pdcid_t PDCobj_create_mpi(pdcid_t cont_id, const char *obj_name, pdcid_t obj_create_prop,
                                        int rank_id, MPI_Comm comm)
{
    int rank = 0, size = 0;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
        fprintf(stderr, "libpdc: PDCobj_create_mpi: MPI_Comm_rank or MPI_Comm_size failed\n");
        return 0;
    }
    if (rank_id < 0 || rank_id >= size) {
        /* Every rank sees it: none waits for the others. */
        fprintf(stderr, "libpdc: PDCobj_create_mpi(cont %llu, \"%s\", prop %llu, rank %d): rank %d: rank %d is not in the communicator (size %d)\n",
                (unsigned long long)cont_id, obj_name ? obj_name : "(null)", (unsigned long long)obj_create_prop,
                rank_id, rank, rank_id, size);
        return 0;
    }
    pdcid_t  obj  = 0;
    uint64_t head[2] = {0, 0}; /* created, meta_id */
    if (rank == rank_id) {
        obj = PDCobj_create(cont_id, obj_name, obj_create_prop);
        struct pdc_obj_info *info = obj != 0 ? PDCobj_get_info(obj) : NULL;
        if (info != NULL) {
            head[0] = 1;
            head[1] = info->meta_id;
            free(info);
        }
        else if (obj != 0) { /* the others could not open it: leave nothing behind */
            PDCobj_del(obj);
            PDCobj_close(obj);
            obj = 0;
        }
    }
    if (MPI_Bcast(head, 2, MPI_UINT64_T, rank_id, comm) != MPI_SUCCESS) {
        fprintf(stderr, "libpdc: PDCobj_create_mpi: rank %d: MPI_Bcast failed\n", rank);
        return obj;
    }
    if (head[0] == 0) {
        if (rank != rank_id)
            fprintf(stderr, "libpdc: PDCobj_create_mpi: rank %d: rank %d's create failed (its line says why)\n", rank,
                    rank_id);
        return 0;
    }
    if (rank == rank_id)
        return obj;
    return pdc_obj_open_created(cont_id, head[1], obj_create_prop);
}
#endif /* ENABLE_MPI */

#endif /* PDC_MPI_H */
