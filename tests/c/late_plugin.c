/* A plugin for late_module.c: allocates and frees as soon as it is called, and can use an
 * object after freeing it (built with -shared -fPIC, without frame pointers). */
#include <stdlib.h>
#include <string.h>

struct late {
    int tag;
    char pad[60];
};

__attribute__((noinline)) struct late *make_late(int tag) {
    struct late *p = malloc(sizeof *p);
    if (!p) abort();
    memset(p, 0, sizeof *p);
    p->tag = tag;
    return p;
}

__attribute__((noinline)) void drop_late(struct late *p) { free(p); }

__attribute__((noinline)) int touch_late(struct late *p) { return ((volatile struct late *)p)->tag; }

int late_churn(int tag) {
    struct late *p = make_late(tag);
    int t = p->tag;
    drop_late(p);
    return t;
}

int late_bug(void) {
    struct late *p = make_late(7);
    drop_late(p);
    return touch_late(p);
}
