/* A library that the deepbind test opens with RTLD_DEEPBIND: it frees what the program
 * allocated, and the program frees what it allocates (built with -shared -fPIC). */
#include <stdlib.h>
#include <string.h>

/* Also defined by the program: the library's own definition is the one it calls. */
int which(void) { return 2; }

char *lib_copy(const char *s) {
    char *p = malloc(strlen(s) + 1);
    if (p) strcpy(p, s);
    return p;
}

void lib_free(void *p) { free(p); }

void *lib_grow(void *p, size_t n) { return realloc(p, n); }

int lib_which(void) { return which(); }
