/* Loads N copies of a plugin (DIR/plugin<i>.so, built from late_plugin.c) one right after
 * another; each allocates and frees as soon as it is loaded, and every other copy is unloaded
 * again at once, so that later copies may be mapped where earlier ones were. The last copy
 * then uses an object after freeing it: the report's stacks must name the plugin's functions
 * and this program's main below them. With `relative`, the program moves into DIR first and
 * loads the copies as `./plugin<i>.so`.
 * usage: late_module DIR N [relative] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int n = atoi(argv[2]);
    int relative = argc > 3 && !strcmp(argv[3], "relative");
    if (relative && chdir(argv[1]) != 0) {
        perror("chdir");
        return 2;
    }
    char path[4096];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/plugin%d.so", relative ? "." : argv[1], i);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        int (*churn)(int) = (int (*)(int))dlsym(h, "late_churn");
        int (*bug)(void) = (int (*)(void))dlsym(h, "late_bug");
        if (!churn || !bug) return 3;
        if (churn(i) != i) return 4;
        if (i == n - 1) {
            printf("survived %d\n", bug());
            return 0;
        }
        if (i % 2 == 0) dlclose(h);
    }
    return 0;
}
