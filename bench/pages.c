/* pages: malloc/free of page-sized objects (default 4096 bytes, like a server's I/O buffers)
 * with SLOTS live, first and last byte written: one page object, one install and one
 * revocation per operation under nevermore.
 * usage: pages [OPS [SLOTS [SIZE]]]   prints: RESULT ns_per_op=<float> */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static uint64_t rng(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }
int main(int argc, char **argv) {
  long ops = argc > 1 ? atol(argv[1]) : 1L << 20;
  long slots = argc > 2 ? atol(argv[2]) : 256;
  long sz = argc > 3 ? atol(argv[3]) : 4096;
  char **live = malloc(sizeof(void *) * slots);
  uint64_t s = 88172645463325252ULL;
  for (long i = 0; i < slots; i++) live[i] = malloc(sz);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < ops; i++) {
    uint64_t r = rng(&s);
    long k = r % slots;
    free(live[k]);
    live[k] = malloc(sz);
    live[k][0] = i;
    live[k][sz - 1] = i;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("RESULT ns_per_op=%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ops);
}
