/* libctor.so: a library linked into a program (or preloaded before libnevermore.so) whose
 * early constructor allocates, possibly before the allocator's own constructor ran. */
#include <stdlib.h>
#include <string.h>

char *ctor_objects[8];
int ctor_ran;

__attribute__((constructor(101))) static void early(void) {
    for (int i = 0; i < 8; i++) {
        ctor_objects[i] = malloc(100 * (i + 1));
        if (ctor_objects[i]) memset(ctor_objects[i], 'A' + i, 100 * (i + 1));
    }
    /* Churn: allocate and free before anything else ran. */
    for (int i = 0; i < 100; i++) free(calloc(1, 10 + i * 37));
    ctor_ran = 1;
}
