/* small: malloc/free of small objects (16..16+MAXSIZE-1 bytes) with SLOTS live, the object
 * written once: mostly user-space work, since a page holds dozens of objects.
 * usage: small [OPS [SLOTS [MAXSIZE]]]   prints: RESULT ns_per_op=<float> */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static uint64_t rng(uint64_t*s){*s^=*s<<13;*s^=*s>>7;*s^=*s<<17;return *s;}
int main(int argc,char**argv){
  long ops=argc>1?atol(argv[1]):1L<<23; long slots=argc>2?atol(argv[2]):1024; long maxsz=argc>3?atol(argv[3]):64;
  void**live=malloc(sizeof(void*)*slots); uint64_t s=88172645463325252ULL;
  for(long i=0;i<slots;i++){live[i]=malloc(16+rng(&s)%maxsz);}
  struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a);
  for(long i=0;i<ops;i++){uint64_t r=rng(&s); long k=r%slots; free(live[k]); size_t n=16+(r>>32)%maxsz; live[k]=malloc(n); ((volatile char*)live[k])[0]=i;}
  clock_gettime(CLOCK_MONOTONIC,&b);
  printf("RESULT ns_per_op=%.2f\n",((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/ops);
}
