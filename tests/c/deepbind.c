/* Memory passed between the program and a library opened with RTLD_DEEPBIND (PHP opens its
 * extensions so): each frees or grows what the other allocated. Prints "OK" and, from the
 * library's call of `which`, "library's own" or "program's". Usage: deepbind LIB.so */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int which(void) { return 1; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    char *(*lib_copy)(const char *) = (char *(*)(const char *))dlsym(h, "lib_copy");
    void (*lib_free)(void *) = (void (*)(void *))dlsym(h, "lib_free");
    void *(*lib_grow)(void *, size_t) = (void *(*)(void *, size_t))dlsym(h, "lib_grow");
    int (*lib_which)(void) = (int (*)(void))dlsym(h, "lib_which");
    if (!lib_copy || !lib_free || !lib_grow || !lib_which) return 2;
    for (int i = 0; i < 1000; i++) {
        char *mine = malloc(100 + i);
        memset(mine, 'x', 99 + i);
        mine[99 + i] = 0;
        char *theirs = lib_copy(mine); /* the library allocates */
        lib_free(mine);                /* and frees the program's */
        theirs = lib_grow(theirs, 5000 + i);
        if (!theirs || theirs[0] != 'x') return 3;
        free(theirs);                  /* the program frees the library's */
    }
    char *big = malloc(1 << 20);
    lib_free(big);
    printf("OK, %s\n", lib_which() == 2 ? "library's own" : "program's");
    return 0;
}
