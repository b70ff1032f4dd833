/*
 * obj_mpi: PDCobj_create_mpi (pdc_mpi.h), run with mpiexec -n 2: one rank
 * creates, every rank gets a handle to that object, also when each rank
 * names its own container; a second create of the same object fails on
 * every rank; a rank out of range fails on every rank.
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
    const char *name = argc > 1 ? argv[1] : "obj-mpi";

    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "rank %d: PDCinit failed", rank);
    pdcid_t cont = PDCcont_create_col("obj-mpi", PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(cont != 0, "rank %d: PDCcont_create_col failed", rank);
    pdcid_t  prop    = PDCprop_create(PDC_OBJ_CREATE, pdc);
    uint64_t dims[2] = {4, 5};
    int      buf     = 0;
    CHECK(PDCprop_set_obj_dims(prop, 2, dims) == SUCCEED && PDCprop_set_obj_type(prop, PDC_FLOAT) == SUCCEED &&
              PDCprop_set_obj_time_step(prop, 2) == SUCCEED && PDCprop_set_obj_buf(prop, &buf) == SUCCEED,
          "rank %d: prop", rank);

    /* The last rank creates. */
    int     creator = size - 1;
    pdcid_t obj     = PDCobj_create_mpi(cont, name, prop, creator, MPI_COMM_WORLD);
    CHECK(obj != 0, "rank %d: PDCobj_create_mpi failed", rank);
    struct pdc_obj_info *info = PDCobj_get_info(obj);
    CHECK(info != NULL && strcmp(info->name, name) == 0 && info->obj_pt->ndim == 2 && info->obj_pt->dims[1] == 5 &&
              info->obj_pt->type == PDC_FLOAT,
          "rank %d: info", rank);
    uint64_t mine = info->meta_id, theirs = 0;
    free(info);
    if (rank == creator)
        theirs = mine;
    MPI_Bcast(&theirs, 1, MPI_UINT64_T, creator, MPI_COMM_WORLD);
    CHECK(mine == theirs, "rank %d: object %llu, the creator's %llu", rank, (unsigned long long)mine,
          (unsigned long long)theirs);
    void **slot = PDCobj_buf_retrieve(obj);
    CHECK(slot != NULL && *slot == &buf, "rank %d: buf_retrieve", rank);

    /* A tag put on one rank is read on the others. */
    if (rank == 0)
        CHECK(PDCobj_put_tag(obj, "by", "rank0", PDC_STRING, 6) == SUCCEED, "put_tag");
    MPI_Barrier(MPI_COMM_WORLD);
    void          *value = NULL;
    psize_t        vsize = 0;
    pdc_var_type_t type;
    CHECK(PDCobj_get_tag(obj, "by", &value, &type, &vsize) == SUCCEED && vsize == 6 && strcmp(value, "rank0") == 0,
          "rank %d: get_tag", rank);
    free(value);

    /* Each rank names its own container, as PDC's create_obj_coll and
     * read_write_col_perf do: rank 0 creates in its own, every other rank
     * gets that object all the same, and reads what rank 0 wrote. */
    char own_name[64], obj_name[80];
    snprintf(own_name, sizeof own_name, "%s-c%d", name, rank);
    snprintf(obj_name, sizeof obj_name, "%s-own", name);
    pdcid_t own = PDCcont_create(own_name, PDCprop_create(PDC_CONT_CREATE, pdc));
    CHECK(own != 0, "rank %d: PDCcont_create(%s) failed", rank, own_name);
    pdcid_t shared = PDCobj_create_mpi(own, obj_name, prop, 0, MPI_COMM_WORLD);
    CHECK(shared != 0, "rank %d: PDCobj_create_mpi through its own container failed", rank);
    uint64_t off[2] = {0, 0};
    float    vals[20];
    for (int i = 0; i < 20; i++)
        vals[i] = rank == 0 ? (float)i * 1.5f : -1;
    pdcid_t reg = PDCregion_create(2, off, dims);
    pdcid_t tr  = PDCregion_transfer_create(vals, rank == 0 ? PDC_WRITE : PDC_READ, shared, reg, reg);
    if (rank == 0)
        CHECK(tr != 0 && PDCregion_transfer_start(tr) == SUCCEED && PDCregion_transfer_wait(tr) == SUCCEED,
              "rank 0: write");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) {
        CHECK(tr != 0 && PDCregion_transfer_start(tr) == SUCCEED && PDCregion_transfer_wait(tr) == SUCCEED,
              "rank %d: read", rank);
        for (int i = 0; i < 20; i++)
            CHECK(vals[i] == (float)i * 1.5f, "rank %d: element %d is %g, rank 0 wrote %g", rank, i, vals[i],
                  (float)i * 1.5f);
    }
    CHECK(PDCregion_transfer_close(tr) == SUCCEED && PDCregion_close(reg) == SUCCEED, "rank %d: close", rank);
    CHECK(PDCobj_close(shared) == SUCCEED && PDCcont_close(own) == SUCCEED, "rank %d: close own", rank);

    /* The same object again: the creator's create fails, so every rank's. */
    CHECK(PDCobj_create_mpi(cont, name, prop, creator, MPI_COMM_WORLD) == 0, "rank %d: created twice", rank);
    /* A rank not in the communicator. */
    CHECK(PDCobj_create_mpi(cont, "other", prop, size, MPI_COMM_WORLD) == 0, "rank %d: rank out of range", rank);

    CHECK(PDCobj_close(obj) == SUCCEED, "rank %d: PDCobj_close failed", rank);
    CHECK(PDCcont_close(cont) == SUCCEED, "rank %d: PDCcont_close failed", rank);
    CHECK(PDCclose(pdc) == SUCCEED, "rank %d: PDCclose failed", rank);
    MPI_Finalize();
    if (rank == 0)
        printf("obj_mpi: ok on %d ranks\n", size);
    return 0;
}
