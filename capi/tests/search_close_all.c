/*
 * search_close_all: PDC_Client_close_all_server, as PDC programs end a run
 * (compare PDC's close_server.c): after it the servers are gone, handles
 * still close, and a second call fails saying there is nothing to stop.
 */
#include "check.h"
#include "pdc.h"

int main(void)
{
    pdcid_t pdc = PDCinit("pdc");
    CHECK(pdc != 0, "PDCinit failed");
    CHECK(PDC_Client_close_all_server() == SUCCEED, "PDC_Client_close_all_server failed");
    CHECK(PDCclose(pdc) == SUCCEED, "PDCclose after close_all_server failed");
    CHECK(PDC_Client_close_all_server() == FAIL, "a second close_all_server succeeded");
    printf("search_close_all: ok\n");
    return 0;
}
