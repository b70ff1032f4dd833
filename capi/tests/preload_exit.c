/* preload_exit PATH STATUS: writes part of PATH and leaves it open to exit
 * with STATUS, as a program whose computation fails mid-output does. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    FILE *f = fopen(argv[1], "w");
    if (f == NULL)
        return 2;
    fputs("the first half of the output", f);
    exit(atoi(argv[2]));
}
