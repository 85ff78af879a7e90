/* A small shared library that allocates in its constructor, its functions and its destructor
 * (built with -shared -fPIC by the stress and hostile-environment tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *table[32];

__attribute__((constructor(101))) static void plugin_init(void) {
    for (int i = 0; i < 32; i++) {
        table[i] = malloc(16 + i * 100);
        if (!table[i]) abort();
        memset(table[i], 'a' + i % 26, 16 + i * 100);
    }
    if (getenv("PLUGIN_SAY")) printf("plugin constructor ran\n");
}

__attribute__((destructor)) static void plugin_fini(void) {
    for (int i = 0; i < 32; i++) {
        free(table[i]);
        table[i] = 0;
    }
}

int plugin_check(void) {
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16 + i * 100; j++)
            if (table[i][j] != 'a' + i % 26) return 0;
    return 1;
}

char *plugin_make_string(int n) {
    char *s = malloc(64);
    if (s) snprintf(s, 64, "plugin string %d", n);
    return s;
}
