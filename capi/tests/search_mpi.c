/*
 * search_mpi: the _mpi tag searches (pdc_mpi.h), run with mpiexec -n 2:
 * rank 0 inserts DART entries, then every rank searches together and gets
 * the whole result; a query matching nothing gives 0 ids on every rank.
 */
#include <mpi.h>

#include "check.h"
#include "pdc.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "run with mpiexec -n 2 or more, not %d", size);

    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "rank %d: PDCinit failed", rank);
    uint64_t base = 7000000;
    if (rank == 0)
        for (int i = 0; i < 5; i++) {
            char val[32];
            snprintf(val, sizeof val, "run%d", i);
            CHECK(PDC_Client_insert_obj_ref_into_dart(DART_HASH, "mpikey", val, REF_PRIMARY_ID, base + i) == SUCCEED,
                  "insert %d", i);
        }
    MPI_Barrier(MPI_COMM_WORLD);

    for (int round = 0; round < 3; round++) {
        int       n   = -1;
        uint64_t *ids = NULL;
        CHECK(PDC_Client_search_obj_ref_through_dart_mpi(DART_HASH, "mpi*=*un*", REF_PRIMARY_ID, &n, &ids,
                                                         MPI_COMM_WORLD) == SUCCEED,
              "rank %d: search_mpi failed", rank);
        CHECK(n == 5, "rank %d: %d ids, want 5", rank, n);
        for (int i = 0; i < 5; i++)
            CHECK(ids[i] == base + (uint64_t)i, "rank %d: ids[%d] = %llu", rank, i, (unsigned long long)ids[i]);
        free(ids);

        int32_t     v  = 1;
        pdc_kvtag_t kv = {.name = "no-such-mpi-tag", .size = sizeof v, .type = PDC_INT, .value = &v};
        n              = -1;
        CHECK(PDC_Client_query_kvtag_mpi(&kv, &n, &ids, MPI_COMM_WORLD) == SUCCEED && n == 0 && ids == NULL,
              "rank %d: query_kvtag_mpi: n %d", rank, n);
    }
    /* A bad query fails on every rank. */
    int       n;
    uint64_t *ids;
    CHECK(PDC_Client_search_obj_ref_through_dart_mpi(DART_HASH, "nokv", REF_PRIMARY_ID, &n, &ids, MPI_COMM_WORLD) ==
              FAIL,
          "rank %d: a bad search_mpi succeeded", rank);

    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose failed");
    MPI_Finalize();
    if (rank == 0)
        printf("search_mpi: ok on %d ranks\n", size);
    return 0;
}
