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

#ifdef ENABLE_MPI
#include <stdio.h>
#include "pdc_client_connect.h"

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
#endif /* ENABLE_MPI */

#endif /* PDC_MPI_H */
