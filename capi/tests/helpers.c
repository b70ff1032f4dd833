/*
 * helpers: what programs written for PDC take from PDC's headers besides
 * its API, built with PDC's link line (-lpdc -lpdc_commons): the headers
 * pdc_client_connect.h, pdc_client_server_common.h and pdc_timing.h, and
 * the helpers PDC's own test programs call through them
 * (PDC_get_elapsed_time_double, println, gen_random_strings). Needs no
 * server. run.sh checks its stdout.
 */
#include <ctype.h>

#include "check.h"
#include "pdc.h"
#include "pdc_client_connect.h"
#include "pdc_client_server_common.h"
#include "pdc_timing.h"

/* check_strings checks n strings of minlen to maxlen characters, each
 * one of the first k of the alphabet, and frees them. */
static void check_strings(char **s, int n, int minlen, int maxlen, int digits, int other)
{
    CHECK(s != NULL, "gen_random_strings(%d, %d, %d) returned NULL", n, minlen, maxlen);
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(s[i]);
        CHECK(len >= minlen && len <= maxlen, "string %d, \"%s\", has %d characters, want %d to %d", i, s[i], len,
              minlen, maxlen);
        for (int j = 0; j < len; j++) {
            unsigned char c = (unsigned char)s[i][j];
            CHECK(islower(c) || (digits && isdigit(c)) || (other && isgraph(c)),
                  "string %d, \"%s\": character %d (%c) is not in the alphabet asked for", i, s[i], j, c);
        }
        free(s[i]);
    }
    free(s);
}

int main(void)
{
    struct timeval from = {10, 900000}, to = {12, 150000};
    double         d    = PDC_get_elapsed_time_double(&from, &to);
    CHECK(d > 1.2499 && d < 1.2501, "PDC_get_elapsed_time_double: %g, want 1.25", d);

    println("println %d%s", 42, "!");

    srand(7);
    check_strings(gen_random_strings(50, 6, 8, 26), 50, 6, 8, 0, 0);
    check_strings(gen_random_strings(50, 3, 3, 36), 50, 3, 3, 1, 0);
    check_strings(gen_random_strings(50, 0, 12, 1000), 50, 0, 12, 1, 1);
    check_strings(gen_random_strings(5, 4, 4, 0), 5, 4, 4, 0, 0);
    CHECK(gen_random_strings(0, 1, 2, 26) == NULL, "gen_random_strings of 0 strings");
    CHECK(gen_random_strings(2, 5, 4, 26) == NULL, "gen_random_strings with minlen past maxlen");

    CHECK(PDC_timing_report("helpers") == 0, "PDC_timing_report");
    printf("helpers: ok\n");
    return 0;
}
