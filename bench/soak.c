#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* N allocations of random sizes 0..1024; 99% short-lived (a ring of 1024 slots), 1% long-lived
   (a ring of 100000 slots, so they live ~10^7 allocations). Prints time and memory samples. */
static long kb(const char* file, const char* key) {
  FILE* f = fopen(file, "r"); char line[256]; long v = -1;
  while (f && fgets(line, sizeof line, f)) if (!strncmp(line, key, strlen(key))) { v = atol(line + strlen(key) + 1); break; }
  if (f) fclose(f); return v;
}
static long vmas(void) { FILE* f = fopen("/proc/self/maps","r"); int c; long n=0; while((c=fgetc(f))!=EOF) n += c=='\n'; fclose(f); return n; }
int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000000;
  static void* s_ring[1024]; static void* l_ring[100000];
  unsigned s = 12345; long peak_pss = 0;
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    size_t sz = (s >> 12) % 1025;
    void* p = malloc(sz); if (sz) ((char*)p)[0] = 1;
    if ((s >> 4) % 100 == 0) { long k = (s >> 8) % 100000; free(l_ring[k]); l_ring[k] = p; }
    else { int k = (s >> 8) & 1023; free(s_ring[k]); s_ring[k] = p; }
    if (i % (n / 10) == 0) {
      long pss = kb("/proc/self/smaps_rollup", "Pss:"); if (pss > peak_pss) peak_pss = pss;
      fprintf(stderr, "soak %ld: rss %ld kB pss %ld kB vmas %ld pte %ld kB\n", i, kb("/proc/self/status","VmRSS:"), pss, vmas(), kb("/proc/self/status","VmPTE:"));
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.1f ns/op, peak rss %ld kB, peak pss %ld kB (sampled), end vmas %ld\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/n, kb("/proc/self/status","VmHWM:"), peak_pss, vmas());
}
