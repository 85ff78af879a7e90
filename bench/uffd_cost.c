/* uffd_cost: what installing and revoking alias pages costs on this kernel. A memfd of 8192
 * pages is mapped again and again (one mirror per repetition), registered with userfaultfd in
 * MINOR|MISSING mode; runs of RUN pages every STRIDE pages are installed with UFFDIO_CONTINUE
 * (each page then written once), then zapped with MADV_DONTNEED through process_madvise calls
 * of 256 ranges.
 * usage: uffd_cost [RUN [STRIDE]] (RUN 1 by default)   e.g. for r in 1 4 16 64; do ./uffd_cost $r; done */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/userfaultfd.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define NP 8192
int main(int argc,char**argv){
  int run=argc>1?atoi(argv[1]):1; int stride=argc>2?atoi(argv[2]):run;
  int fd=memfd_create("p",0); ftruncate(fd,(long)NP*4096);
  char*canon=mmap(0,(long)NP*4096,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(canon,1,(long)NP*4096);
  int uffd=syscall(SYS_userfaultfd,O_CLOEXEC|O_NONBLOCK|1 /*USER_MODE_ONLY*/);
  struct uffdio_api api={.api=UFFD_API,.features=UFFD_FEATURE_SIGBUS|UFFD_FEATURE_MINOR_SHMEM};
  if(ioctl(uffd,UFFDIO_API,&api)){perror("api");return 1;}
  int pidfd=syscall(SYS_pidfd_open,getpid(),0);
  double tins=0,tzap=0; long calls=0,zcalls=0,pages=0;
  for(int rep=0;rep<40;rep++){
    char*m=mmap(0,(long)NP*4096,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
    struct uffdio_register r={.range={(long)m,(long)NP*4096},.mode=UFFDIO_REGISTER_MODE_MINOR|UFFDIO_REGISTER_MODE_MISSING};
    if(ioctl(uffd,UFFDIO_REGISTER,&r)){perror("reg");return 1;}
    double t0=now();
    for(long p=0;p+run<=NP;p+=stride){
      struct uffdio_continue c={.range={(long)m+p*4096,(long)run*4096},.mode=UFFDIO_CONTINUE_MODE_DONTWAKE};
      if(ioctl(uffd,UFFDIO_CONTINUE,&c)){perror("cont");return 1;}
      calls++; pages+=run;
      for(int k=0;k<run;k++) m[(p+k)*4096]++;
    }
    double t1=now();
    struct iovec iov[256]; int n=0;
    for(long p=0;p+run<=NP;p+=stride){
      iov[n].iov_base=m+p*4096; iov[n].iov_len=(long)run*4096; n++;
      if(n==256){ if(syscall(SYS_process_madvise,pidfd,iov,n,MADV_DONTNEED,0)<0){perror("pm");return 1;} zcalls++; n=0;}
    }
    if(n){syscall(SYS_process_madvise,pidfd,iov,n,MADV_DONTNEED,0);zcalls++;}
    double t2=now(); tins+=t1-t0; tzap+=t2-t1;
    munmap(m,(long)NP*4096);
  }
  printf("run=%d stride=%d: install %.0f ns/call %.0f ns/page | zap %.0f ns/range %.0f ns/page\n",run,stride,tins*1e9/calls,tins*1e9/pages,tzap*1e9/calls,tzap*1e9/pages);
}
