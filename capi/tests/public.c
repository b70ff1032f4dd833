/*
 * public: PDC's public typedefs and enums, as PDC programs use them
 * (PDC_int_t for PDCprop_set_obj_dims's ndim, pdc_server_selection_t),
 * with PDC's types and values. It needs no servers: compiling is most of
 * the test.
 */
#include "check.h"
#include "pdc.h"

_Static_assert(_Generic((PDC_int_t)0, int: 1, default: 0), "PDC_int_t is int");
_Static_assert(_Generic((PDC_float_t)0, float: 1, default: 0), "PDC_float_t is float");
_Static_assert(_Generic((PDC_double_t)0, double: 1, default: 0), "PDC_double_t is double");
_Static_assert(PDC_SERVER_DEFAULT == 0 && PDC_SERVER_PER_CLIENT == 1, "pdc_server_selection_t's values");

int main(void)
{
    pdc_server_selection_t sel  = PDC_SERVER_PER_CLIENT;
    PDC_int_t              ndim = 1;
    /* PDCprop_set_obj_dims takes a PDC_int_t, as PDC declares it. */
    perr_t (*set_dims)(pdcid_t, PDC_int_t, uint64_t *) = PDCprop_set_obj_dims;
    CHECK(set_dims != NULL && sel == 1 && ndim == 1, "public types");
    printf("public: ok\n");
    return 0;
}
