/* A wild access into an alias page that the object's epoch never handed out.
 * Usage: wild PAGES
 * Allocates a 100-byte object, then allocates and frees 2 000 000 objects of the same size
 * (epochs go by, and the object's stops issuing), then reads the page PAGES pages after the
 * object's page. Prints NO TRAP if the read returns. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    long k = atol(argv[1]);
    char *p = malloc(100);
    volatile char *q = (char *)(((uintptr_t)p & ~(uintptr_t)4095) + 4096 * k);
    for (int i = 0; i < 2000000; i++) {
        sink = malloc(100);
        free(sink);
    }
    char c = *q;
    printf("NO TRAP (read %d)\n", c);
    free(p);
    return 0;
}
